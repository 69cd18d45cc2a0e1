package idempotency_test

import (
	"path/filepath"
	"testing"

	"github.com/csikit/csikit/journal"
)

const (
	mCreate = "/csi.v1.Controller/CreateVolume"
	mDelete = "/csi.v1.Controller/DeleteVolume"
)

type journalCloser interface {
	journal.Journal
	Close() error
}

type nopCloser struct{ *journal.Memory }

func (nopCloser) Close() error { return nil }

// stores returns a constructor per Journal implementation; the
// interceptor must behave the same on all.
func stores() map[string]func(tb testing.TB) journalCloser {
	return map[string]func(tb testing.TB) journalCloser{
		"memory": func(testing.TB) journalCloser { return nopCloser{journal.NewMemory()} },
		"file": func(tb testing.TB) journalCloser {
			j, err := journal.OpenFile(filepath.Join(tb.TempDir(), "j.db"), journal.FileOptions{})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = j.Close() })
			return j
		},
	}
}
