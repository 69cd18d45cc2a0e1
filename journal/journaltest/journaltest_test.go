package journaltest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/journal/journaltest"
)

// The bugs journaltest must catch, each planted in a wrapper around the
// Memory journal, with the case that must fail.
var bugs = map[string]struct {
	wrap func(journal.Journal) journal.Journal
	want string
}{
	"retry-gets-new-id":       {func(j journal.Journal) journal.Journal { return newIDOnRetry{j} }, "reserve_retry_commit"},
	"commit-forgets-response": {func(j journal.Journal) journal.Journal { return dropResponse{j} }, "reserve_retry_commit"},
	"release-not-idempotent":  {func(j journal.Journal) journal.Journal { return strictRelease{j} }, "release_is_idempotent"},
	"names-truncated":         {func(j journal.Journal) journal.Journal { return truncating{j} }, "hostile_names"},
}

// newIDOnRetry forgets every name it bound once, so a retry after a
// "crash" makes a second object.
type newIDOnRetry struct{ journal.Journal }

func (j newIDOnRetry) Reserve(ctx context.Context, r journal.Reservation) (journal.Record, error) {
	rec, err := j.Journal.Reserve(ctx, r)
	if err == nil && !rec.Fresh && !rec.Committed {
		_ = j.Journal.Release(ctx, r.Kind, rec.ID)
		return j.Journal.Reserve(ctx, r)
	}
	return rec, err
}

type dropResponse struct{ journal.Journal }

func (j dropResponse) Commit(ctx context.Context, k journal.Kind, name, id string, _ []byte) error {
	return j.Journal.Commit(ctx, k, name, id, nil)
}

type strictRelease struct{ journal.Journal }

func (j strictRelease) Release(ctx context.Context, k journal.Kind, id string) error {
	if _, ok, _ := j.Journal.LookupID(ctx, k, id); !ok {
		return os.ErrNotExist
	}
	return j.Journal.Release(ctx, k, id)
}

// truncating keeps names as a backend with a 40-byte tag limit would if
// it cut them instead of hashing them.
type truncating struct{ journal.Journal }

func cut(s string) string { return s[:min(len(s), 40)] }

func (j truncating) Reserve(ctx context.Context, r journal.Reservation) (journal.Record, error) {
	r.Name = cut(r.Name)
	return j.Journal.Reserve(ctx, r)
}

func (j truncating) LookupName(ctx context.Context, k journal.Kind, name string) (journal.Record, bool, error) {
	return j.Journal.LookupName(ctx, k, cut(name))
}

func (j truncating) Commit(ctx context.Context, k journal.Kind, name, id string, resp []byte) error {
	return j.Journal.Commit(ctx, k, cut(name), id, resp)
}

// TestPlanted is run by TestRunCatchesBugs in a child process, with the
// bug to plant in JOURNALTEST_BUG; it must fail there.
func TestPlanted(t *testing.T) {
	bug, ok := bugs[os.Getenv("JOURNALTEST_BUG")]
	if !ok {
		return // only TestRunCatchesBugs's child processes plant a bug
	}
	m := journal.NewMemory()
	journaltest.Run(t, journaltest.Options{
		Open:     func(*testing.T) journal.Journal { return bug.wrap(m) },
		NoLister: true,
	})
}

// TestRunCatchesBugs shows that Run fails each planted bug in the case
// meant to catch it, and passes the journal without it.
func TestRunCatchesBugs(t *testing.T) {
	for name, bug := range bugs {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestPlanted$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), "JOURNALTEST_BUG="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("journaltest passed a journal with bug %q:\n%s", name, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestPlanted/"+bug.want) {
				t.Errorf("bug %q: case %s did not fail:\n%s", name, bug.want, out)
			}
		})
	}
}

func TestRunPassesMemory(t *testing.T) {
	m := journal.NewMemory()
	journaltest.Run(t, journaltest.Options{Open: func(*testing.T) journal.Journal { return m }})
}
