package journal_test

import (
	"path/filepath"
	"testing"

	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/journal/journaltest"
)

// TestConformance holds both stores csikit ships to the contract
// journaltest checks for every Journal a driver writes.
func TestConformance(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		m := journal.NewMemory()
		journaltest.Run(t, journaltest.Options{
			Open:       func(*testing.T) journal.Journal { return m },
			MaxNameLen: journal.MaxKeyLen,
		})
	})
	for _, c := range []struct {
		name string
		opts journal.FileOptions
	}{
		{"file", journal.FileOptions{}},
		{"file-volatile", journal.FileOptions{Volatile: []journal.Kind{journal.KindVolume, journal.KindSnapshot, journal.KindGroupSnapshot}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			open := func(t *testing.T) *journal.File {
				f, err := journal.OpenFile(path, c.opts)
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
			cur := open(t)
			t.Cleanup(func() { _ = cur.Close() })
			journaltest.Run(t, journaltest.Options{
				Open: func(*testing.T) journal.Journal { return cur },
				Reopen: func(t *testing.T, j journal.Journal) journal.Journal {
					if err := j.(*journal.File).Close(); err != nil {
						t.Fatal(err)
					}
					cur = open(t)
					return cur
				},
				MaxNameLen: journal.MaxKeyLen,
				Volatile:   c.opts.Volatile != nil,
			})
		})
	}
}
