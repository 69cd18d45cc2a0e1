package sanity

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// leakCheck diffs what Config.BackendObjects lists around each case, so
// the case that left an object in the driver's backend is the one that
// fails. An object is reported once: the cases after it, the groups above
// it and the run's end check ignore it.
type leakCheck struct {
	list    func(context.Context) ([]string, error)
	timeout time.Duration

	mu       sync.Mutex
	reported map[string]bool
}

// backendRule is what a leaked backend object breaks.
var backendRule = rule("DeleteVolume/DeleteSnapshot", "the CO calls them to deprovision a volume or delete a snapshot, "+
	"and an OK answer means the artifacts associated with it do not exist any more")

// snapshot lists the backend objects that exist now.
func (l *leakCheck) snapshot() (map[string]bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	objs, err := l.list(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(objs))
	for _, o := range objs {
		m[o] = true
	}
	return m, nil
}

// since returns, sorted, the objects that exist now, were absent from
// before and have not been reported yet, and records them as reported.
func (l *leakCheck) since(before map[string]bool) ([]string, error) {
	now, err := l.snapshot()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reported == nil {
		l.reported = map[string]bool{}
	}
	var out []string
	for o := range now {
		if !before[o] && !l.reported[o] {
			out = append(out, o)
			l.reported[o] = true
		}
	}
	slices.Sort(out)
	return out, nil
}

// count is how many objects have been reported so far.
func (l *leakCheck) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reported)
}

// caseLeaks is the per-case check: before is what existed when the case
// began (err the failure to list it). It runs after the case's own
// cleanups, fails t for each object that appeared and stayed, and reports
// whether it failed t.
func (l *leakCheck) caseLeaks(t *testing.T, before map[string]bool, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("Config.BackendObjects before the case: %v", err)
		return true
	}
	left, err := l.since(before)
	if err != nil {
		t.Errorf("Config.BackendObjects after the case: %v", err)
		return true
	}
	if len(left) == 0 {
		return false
	}
	t.Errorf("got %d backend object(s) left by the case after its cleanup deleted what it created: %s; want none "+
		"(listed by Config.BackendObjects, absent before the case)\n\trule: %s", len(left), quoteAll(left), backendRule)
	return true
}

// quoteAll renders objects as a comma-separated list of quoted names.
func quoteAll(objs []string) string {
	q := make([]string, len(objs))
	for i, o := range objs {
		q[i] = fmt.Sprintf("%q", o)
	}
	return strings.Join(q, ", ")
}

// runLeaksCase is Hygiene/no_backend_objects_left: what the backend holds
// after the whole run against what it held when the driver had started,
// less what the cases already reported.
func (s *suite) runLeaksCase(t *testing.T, start map[string]bool, startErr error) {
	if s.leaks == nil {
		t.Skip("Config.BackendObjects is not set: set it to a func listing the driver's backend objects (volumes, images, snapshots, journal entries) so each case fails that leaves one behind")
	}
	if startErr != nil {
		t.Fatalf("Config.BackendObjects when the run began: %v", startErr)
	}
	left, err := s.leaks.since(start)
	if err != nil {
		t.Fatalf("Config.BackendObjects after the run: %v", err)
	}
	if len(left) > 0 {
		t.Errorf("got %d backend object(s) left after the run that no case left (created outside the cases, e.g. while discovering the driver, or after the case that caused them ended): %s; want none\n\trule: %s",
			len(left), quoteAll(left), backendRule)
	}
	if n := s.leaks.count() - len(left); n > 0 {
		t.Logf("%d backend object(s) the failed cases named are left in the backend too", n)
	}
}
