//go:build linux

package driver

import (
	"context"
	"os"
	"path/filepath"
)

// StateObjects lists what a driver keeps below its state directory, for
// the sanity harness (sanity.Config.BackendObjects, which fails a case
// that leaves one behind): every file and directory below state for
// volumes and snapshots ("volumes/<id>", "images/<id>.img", "images/<id>.staged",
// "snapshots/<id>[.img]", partial copies) and anything else below state,
// two levels deep (what is inside a volume is the volume's data). What
// legitimately stays is left out: the three directories themselves, the
// journal file that holds the name→ID journal and the volume, snapshot and
// group metadata (journal.db) and its compaction file while it is
// rewritten.
func StateObjects(state string) func(context.Context) ([]string, error) {
	keep := map[string]bool{"volumes": true, "images": true, "snapshots": true, "journal.db": true, "journal.db.compact": true}
	return func(context.Context) ([]string, error) {
		top, err := os.ReadDir(state)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, e := range top {
			if !keep[e.Name()] {
				out = append(out, e.Name())
			}
		}
		for _, dir := range []string{"volumes", "images", "snapshots"} {
			es, err := os.ReadDir(filepath.Join(state, dir))
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				out = append(out, dir+"/"+e.Name())
			}
		}
		return out, nil
	}
}
