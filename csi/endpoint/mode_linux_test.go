package endpoint_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/csikit/csikit/csi/endpoint"
)

// The mode must not depend on the process umask (which Listen never
// touches; this test sets it, so it must not run in parallel).
func TestSocketModeIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "csi.sock")
	listen(t, path, endpoint.Options{SocketMode: 0o666})
	if got := mode(t, path).Perm(); got != 0o666 {
		t.Errorf("socket mode under umask 077: got %#o, want 0666", got)
	}
}

// Whoever looks at the path while Listen runs sees either nothing or a
// socket that already has its final mode, never a moment with the default
// mode bind(2) gives.
func TestSocketNeverVisibleWithWrongMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "csi.sock")
	var (
		stop  atomic.Bool
		wrong atomic.Value
		seen  atomic.Int64
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if fi, err := os.Lstat(path); err == nil {
				seen.Add(1)
				if fi.Mode().Type() == fs.ModeSocket && fi.Mode().Perm() != 0o600 {
					wrong.Store(fi.Mode())
				}
			}
		}
	}()
	for range 200 {
		l, err := endpoint.Listen(t.Context(), path, endpoint.Options{SocketMode: 0o600})
		if err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatal(err)
		}
		l.Close()
	}
	stop.Store(true)
	wg.Wait()
	if m := wrong.Load(); m != nil {
		t.Errorf("socket observed with mode %v, want 0600 from the first moment", m)
	}
	t.Logf("observed the socket %d times", seen.Load())
}
