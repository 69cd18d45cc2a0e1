package journal_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/csikit/csikit/journal"
)

// The crash test re-executes the test binary as a child that hammers a
// File from several goroutines, and SIGKILLs it at a random moment.
// The child announces each operation before it starts ("begin") and after
// it returned ("ok"); names are split between goroutines, so per name the
// announcements are in commit order. After each kill the parent reopens the
// file and checks: the file is consistent (every record verifies and
// replays to the state in memory, names ↔ IDs one to one), and every name
// is in the state its last acknowledged operation left, or in the state its
// one in-flight operation would leave.

const (
	crashChildEnv = "CSIKIT_IDEMPOTENCY_CRASH_CHILD"
	// crashVolatileEnv makes the child's reservations volatile.
	crashVolatileEnv = "CSIKIT_JOURNAL_CRASH_VOLATILE"
	crashNames       = 48
	crashWorkers     = 6
)

func crashFingerprint(name string) []byte { return []byte("fp-" + name) }

// crashChild runs in the child process until it is killed.
func crashChild() {
	path := os.Getenv(crashChildEnv)
	j, err := journal.OpenFile(path, crashOptions(os.Getenv(crashVolatileEnv) != ""))
	if err != nil {
		fmt.Printf("BUG open: %v\n", err)
		os.Exit(2)
	}
	var mu sync.Mutex // one line at a time on stdout
	say := func(format string, a ...any) {
		mu.Lock()
		fmt.Fprintf(os.Stdout, format+"\n", a...)
		mu.Unlock()
	}
	say("ready")
	ctx := context.Background()
	for w := range crashWorkers {
		go func() {
			for {
				name := "pvc-" + strconv.Itoa(w+crashWorkers*rand.IntN(crashNames/crashWorkers))
				rec, ok, err := j.LookupName(ctx, journal.KindVolume, name)
				if err != nil {
					say("BUG lookup %s: %v", name, err)
					os.Exit(2)
				}
				switch {
				case !ok:
					id := journal.RandomID(name)
					say("begin reserve %s %s", name, id)
					got, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: name, Fingerprint: crashFingerprint(name), ID: id})
					if err != nil || got.ID != id {
						say("BUG reserve %s: got %q, %v; want %q", name, got.ID, err, id)
						os.Exit(2)
					}
					say("ok reserve %s %s", name, id)
				case !rec.Committed:
					// A retry after a crash must find the same ID.
					again, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: name, Fingerprint: crashFingerprint(name), ID: journal.RandomID(name)})
					if err != nil || again.ID != rec.ID {
						say("BUG re-reserve %s: got %q, %v; want %q", name, again.ID, err, rec.ID)
						os.Exit(2)
					}
					say("begin commit %s %s", name, rec.ID)
					if err := j.Commit(ctx, journal.KindVolume, name, rec.ID, []byte("resp-"+rec.ID)); err != nil {
						say("BUG commit %s: %v", name, err)
						os.Exit(2)
					}
					say("ok commit %s %s", name, rec.ID)
				default:
					say("begin release %s %s", name, rec.ID)
					if err := j.Release(ctx, journal.KindVolume, rec.ID); err != nil {
						say("BUG release %s: %v", name, err)
						os.Exit(2)
					}
					say("ok release %s %s", name, rec.ID)
				}
			}
		}()
	}
	select {} // until SIGKILL
}

type crashState struct {
	id        string // "" = absent
	committed bool
}

// crashOptions opens the crash test's journal, with volatile volume
// reservations or not.
func crashOptions(volatile bool) journal.FileOptions {
	if volatile {
		return journal.FileOptions{Volatile: []journal.Kind{journal.KindVolume}}
	}
	return journal.FileOptions{}
}

func TestCrashDuringReserveCommit(t *testing.T) {
	t.Run("durable", func(t *testing.T) { crashDuringReserveCommit(t, false) })
	// Volatile reservations: a SIGKILL loses exactly the uncommitted ones;
	// every acknowledged commit and release survives it.
	t.Run("volatile", func(t *testing.T) { crashDuringReserveCommit(t, true) })
}

func crashDuringReserveCommit(t *testing.T, volatile bool) {
	if testing.Short() {
		t.Skip("crash test re-executes the test binary; skipped in -short mode")
	}
	path := filepath.Join(t.TempDir(), "journal.db")
	model := map[string]crashState{} // acknowledged state per name
	const iterations = 40
	var ops, midway int
	for it := range iterations {
		acked, inflight, out := runCrashChild(t, path, volatile, time.Duration(5+rand.IntN(60))*time.Millisecond)
		for _, l := range out {
			if strings.HasPrefix(l, "BUG") {
				t.Fatalf("iteration %d: child reported %s", it, l)
			}
		}
		ops += len(acked)
		midway += len(inflight)
		for _, a := range acked {
			model[a.name] = a.after
		}
		if volatile {
			// The restart forgets every reservation not committed.
			for name, st := range model {
				if !st.committed {
					model[name] = crashState{}
				}
			}
			for name, st := range inflight {
				if !st.committed {
					inflight[name] = crashState{}
				}
			}
		}
		j, err := journal.OpenFile(path, crashOptions(volatile))
		if err != nil {
			t.Fatalf("iteration %d: reopen: %v", it, err)
		}
		if err := j.Check(); err != nil {
			_ = j.Close()
			t.Fatalf("iteration %d: %v", it, err)
		}
		for i := range crashNames {
			name := "pvc-" + strconv.Itoa(i)
			rec, ok, err := j.LookupName(context.Background(), journal.KindVolume, name)
			if err != nil {
				t.Fatalf("iteration %d: lookup %s: %v", it, name, err)
			}
			got := crashState{}
			if ok {
				got = crashState{id: rec.ID, committed: rec.Committed}
				if back, ok, _ := j.LookupID(context.Background(), journal.KindVolume, rec.ID); !ok || back.Name != name {
					t.Fatalf("iteration %d: ID %s of %s maps back to %q, %v", it, rec.ID, name, back.Name, ok)
				}
				if rec.Committed && string(rec.Response) != "resp-"+rec.ID {
					t.Fatalf("iteration %d: %s response: got %q, want %q", it, name, rec.Response, "resp-"+rec.ID)
				}
			}
			want := model[name]
			if got != want {
				if f, ok := inflight[name]; !ok || got != f {
					t.Fatalf("iteration %d: %s: got %+v, want acknowledged %+v or in-flight %+v", it, name, got, want, inflight[name])
				}
			}
			model[name] = got
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if ops < iterations {
		t.Fatalf("children acknowledged %d operations in %d runs, want at least one per run", ops, iterations)
	}
	if midway == 0 {
		t.Errorf("no kill landed during an operation in %d runs; the test did not exercise crashes", iterations)
	}
	t.Logf("%d runs, %d acknowledged operations, %d operations cut by SIGKILL", iterations, ops, midway)
}

type crashOp struct {
	name  string
	after crashState
}

// runCrashChild starts a child on path, kills it delay after its first
// acknowledged operation, and returns the acknowledged operations in order, the state
// each in-flight operation would leave, and the raw lines.
func runCrashChild(t *testing.T, path string, volatile bool, delay time.Duration) (acked []crashOp, inflight map[string]crashState, lines []string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	if volatile {
		cmd.Env = append(cmd.Env, crashVolatileEnv+"=1")
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("child did not start: %q", sc.Text())
	}
	// SIGKILL delay after the first acknowledged operation, so every run
	// gets some work done even on a slow disk; a stuck child is killed
	// after 10s.
	kill := func() { _ = cmd.Process.Kill() }
	timer := time.AfterFunc(10*time.Second, kill)
	inflight = map[string]crashState{}
	for sc.Scan() {
		l := sc.Text()
		lines = append(lines, l)
		f := strings.Fields(l)
		if len(f) != 4 {
			continue
		}
		after := crashState{}
		switch f[1] {
		case "reserve":
			after = crashState{id: f[3]}
		case "commit":
			after = crashState{id: f[3], committed: true}
		}
		switch f[0] {
		case "begin":
			inflight[f[2]] = after
		case "ok":
			if len(acked) == 0 {
				timer.Stop()
				timer = time.AfterFunc(delay, kill)
			}
			delete(inflight, f[2])
			acked = append(acked, crashOp{name: f[2], after: after})
		}
	}
	timer.Stop()
	_ = cmd.Wait()
	killed = true
	return acked, inflight, lines
}
