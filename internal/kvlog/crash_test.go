//go:build unix

package kvlog

import (
	"bufio"
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
)

const crashEnv = "CSIKIT_KVLOG_CRASH_CHILD"

// crashOptions compact every few hundred records, so kills land in
// compactions too.
var crashOptions = Options{Grow: 8 << 10, CompactAt: 32 << 10}

func TestMain(m *testing.M) {
	if path := os.Getenv(crashEnv); path != "" {
		crashChild(path)
		return
	}
	os.Exit(m.Run())
}

// crashChild: each worker owns a key and writes 1, 2, 3, … to it, saying
// "begin w n" before and "ok w n" after each Update, until it is killed.
func crashChild(path string) {
	db, err := Open(path, crashOptions)
	if err != nil {
		fmt.Printf("BUG open: %v\n", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		fmt.Printf(format+"\n", a...)
		mu.Unlock()
	}
	start := map[int]int{}
	db.View(func(r Reader) error {
		for w := 0; w < 6; w++ {
			start[w], _ = strconv.Atoi(string(r.Get("w", strconv.Itoa(w))))
		}
		return nil
	})
	say("ready")
	for w := 0; w < 6; w++ {
		go func() {
			pad := strings.Repeat("x", rand.IntN(900))
			for n := start[w] + 1; ; n++ {
				say("begin %d %d", w, n)
				if err := db.Update(func(tx *Tx) error {
					tx.Put("w", strconv.Itoa(w), []byte(strconv.Itoa(n)))
					tx.Put("pad", strconv.Itoa(w), []byte(pad)) // variable record sizes
					return nil
				}); err != nil {
					say("BUG update: %v", err)
					os.Exit(2)
				}
				say("ok %d %d", w, n)
			}
		}()
	}
	select {}
}

func TestSIGKILLKeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test re-executes the test binary")
	}
	path := filepath.Join(t.TempDir(), "db")
	kills := 12
	for k := 0; k < kills; k++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acked, begun := map[int]int{}, map[int]int{}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		kill := time.After(time.Duration(50+rand.IntN(250)) * time.Millisecond)
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				var w, n int
				switch {
				case strings.HasPrefix(l, "BUG"):
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatal(l)
				case strings.HasPrefix(l, "begin"):
					fmt.Sscanf(l, "begin %d %d", &w, &n)
					begun[w] = n
				case strings.HasPrefix(l, "ok"):
					fmt.Sscanf(l, "ok %d %d", &w, &n)
					acked[w] = n
				}
			case <-kill:
				cmd.Process.Kill()
				kill = nil
			}
		}
		cmd.Wait()

		db, err := Open(path, crashOptions)
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", k, err)
		}
		if err := db.Verify(); err != nil {
			t.Fatalf("kill %d: %v", k, err)
		}
		for w := 0; w < 6; w++ {
			got, _ := strconv.Atoi(string(get(db, "w", strconv.Itoa(w))))
			if got < acked[w] || (begun[w] > 0 && got > begun[w]) {
				t.Errorf("kill %d: worker %d holds %d; acknowledged %d, begun %d", k, w, got, acked[w], begun[w])
			}
		}
		t.Logf("kill %d: file %d bytes, record %d, acked %v", k, db.size, db.seq, acked)
		db.Close()
	}
}

func TestOpenWaitsOutACompactionInAnotherHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	a := open(t, path, Options{Grow: 4 << 10, CompactAt: 8 << 10})
	opened := make(chan *DB)
	go func() {
		db, err := Open(path, Options{LockTimeout: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		opened <- db
	}()
	time.Sleep(50 * time.Millisecond) // let it block on the lock
	for i := 0; i < 500; i++ {        // several compactions replace the file
		put(t, a, "k", strconv.Itoa(i%10), strings.Repeat("v", 100))
	}
	put(t, a, "last", "k", "v")
	a.Close()
	b := <-opened
	if b == nil {
		return
	}
	defer b.Close()
	if got := string(get(b, "last", "k")); got != "v" {
		t.Fatalf("the waiting Open got a stale file: last/k = %q", got)
	}
}
