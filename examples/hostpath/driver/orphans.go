//go:build linux

package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/csikit/csikit/journal"
)

// volatileKinds are the kinds whose journal reservations stay in memory
// until their commit (journal.FileOptions.Volatile): a create waits for
// one flush of the journal instead of two. The price is removeOrphans.
// Group snapshots keep durable reservations: they are rare, and
// SweepAbandoned finds their members through them.
var volatileKinds = []journal.Kind{journal.KindVolume, journal.KindSnapshot}

// removeOrphans removes, at start and before the driver serves, the data
// of creates that a crash cut short. Their reservations were volatile, so
// no record names them: data under an ID with neither a volume or
// snapshot record nor a durable reservation (one made before reservations
// were volatile, which SweepAbandoned cleans) belongs to a create that
// never answered, and whose retry, if any, gets a new ID. Names that are
// no object's (not a valid ID, an unknown suffix) are left alone and
// logged. Data that cannot be removed (a mount below a directory) is
// logged and kept: the start does not fail for it.
func (d *Driver) removeOrphans(ctx context.Context) error {
	var removed int
	var errs []error
	orphan := func(kind journal.Kind, id string) bool {
		if !validID(id) {
			return false
		}
		// The index alone: at 100,000 volumes, reading and decoding
		// every record here would cost more than the rest of the start.
		if kind == journal.KindVolume && d.store.hasVolume(id) || kind == journal.KindSnapshot && d.store.hasSnapshot(id) {
			return false
		}
		_, held, err := d.journal.LookupID(ctx, kind, id)
		if err != nil {
			errs = append(errs, err)
			return false
		}
		return !held
	}
	done := map[string]bool{}
	clean := func(kind journal.Kind, id string) {
		key := kind.String() + "/" + id
		if done[key] || !orphan(kind, id) {
			return
		}
		done[key] = true
		var err error
		if kind == journal.KindVolume {
			err = d.cleanVolume(ctx, journal.Record{ID: id})
		} else {
			err = d.dropSnapshot(ctx, id)
		}
		if err != nil {
			d.log.Warn("could not remove the data of a create a crash cut short", "kind", kind, "id", id, "error", err)
			return
		}
		removed++
		d.log.Info("removed the data of a create a crash cut short", "kind", kind, "id", id)
	}
	for _, dir := range []string{"volumes", "images", "snapshots"} {
		entries, err := os.ReadDir(filepath.Join(d.opts.StateDir, dir))
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := e.Name()
			// A copy killed midway (fstree.Copy) is its object's too.
			base, partial := strings.CutPrefix(name, ".")
			if partial {
				if base, partial = strings.CutSuffix(base, ".fstree-partial"); !partial {
					base = name
				}
			}
			switch {
			case dir == "volumes":
				clean(journal.KindVolume, base)
			case dir == "images" && strings.HasSuffix(base, ".img"):
				clean(journal.KindVolume, strings.TrimSuffix(base, ".img"))
			case dir == "images" && strings.HasSuffix(base, ".staged"):
				// A staged marker outlives nothing but its volume's record.
				if id := strings.TrimSuffix(base, ".staged"); orphan(journal.KindVolume, id) {
					if err := os.Remove(filepath.Join(d.opts.StateDir, dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
						errs = append(errs, err)
					}
				}
			case dir == "snapshots":
				clean(journal.KindSnapshot, strings.TrimSuffix(base, ".img"))
			default:
				d.log.Warn("unknown file in the state directory left alone", "path", filepath.Join(dir, name))
			}
		}
	}
	if removed > 0 {
		d.log.Info("removed the data of creates a crash cut short", "count", removed)
	}
	return errors.Join(errs...)
}
