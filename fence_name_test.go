package csikit

import "testing"

// A fence record's name gives back its pair whatever the IDs hold, and
// no two pairs share a name.
func TestFenceNameRoundTrip(t *testing.T) {
	seen := map[string][2]string{}
	ids := []string{"", "a", "1", "1:", ":", "12:ab", "a\x00b", "vol/1", "ü"}
	for _, v := range ids {
		for _, n := range ids {
			name := fenceName(v, n)
			gv, gn, ok := parseFenceName(name)
			if !ok || gv != v || gn != n {
				t.Fatalf("parseFenceName(fenceName(%q, %q)) = %q, %q, %v", v, n, gv, gn, ok)
			}
			if p, dup := seen[name]; dup {
				t.Fatalf("pairs %q and %q share the name %q", p, [2]string{v, n}, name)
			}
			seen[name] = [2]string{v, n}
		}
	}
	for _, bad := range []string{"", "x", "3:ab", "-1:a", "01:a", "a:b"} {
		if _, _, ok := parseFenceName(bad); ok {
			t.Errorf("parseFenceName(%q) accepted", bad)
		}
	}
}
