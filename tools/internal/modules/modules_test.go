package modules

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestFind: the root first, nested modules by directory, none from
// testdata, hidden directories or a go.mod marked unreleased.
func TestFind(t *testing.T) {
	root := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":                 "module example.com/r\n",
		"b/go.mod":               "module example.com/r/b\n",
		"a/x/go.mod":             "module example.com/r/a/x\n",
		"tools/go.mod":           "// csikit: unreleased\nmodule example.com/r/tools\n",
		"a/testdata/m/go.mod":    "module example.com/r/a/testdata/m\n",
		".hidden/go.mod":         "module example.com/r/hidden\n",
		"b/notamodule/README.md": "x\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Find(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Module{{".", "example.com/r"}, {"a/x", "example.com/r/a/x"}, {"b", "example.com/r/b"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Find = %v, want %v", got, want)
	}
	if p := got[1].TagPrefix(); p != "a/x/" {
		t.Errorf("TagPrefix of a/x = %q", p)
	}
	if p := got[0].TagPrefix(); p != "" {
		t.Errorf("TagPrefix of the root = %q", p)
	}
}
