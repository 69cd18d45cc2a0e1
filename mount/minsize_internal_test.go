//go:build linux

package mount

import (
	"os"
	"testing"
)

// TestOpenProbeWithoutTmpfile: the fallback for a temporary directory
// without O_TMPFILE leaves no name behind and gives a usable file.
func TestOpenProbeWithoutTmpfile(t *testing.T) {
	for _, tmpfile := range []bool{true, false} {
		dir := t.TempDir()
		f, err := openProbe(dir, tmpfile)
		if err != nil {
			t.Fatalf("tmpfile=%t: %v", tmpfile, err)
		}
		if err := f.Truncate(1 << 20); err != nil {
			t.Errorf("tmpfile=%t: truncate: %v", tmpfile, err)
		}
		if fi, err := f.Stat(); err != nil || fi.Size() != 1<<20 {
			t.Errorf("tmpfile=%t: stat = %v, %v; want 1 MiB", tmpfile, fi, err)
		}
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) != 0 {
			t.Errorf("tmpfile=%t: the directory holds %v (err %v), want nothing", tmpfile, ents, err)
		}
		f.Close()
	}
}
