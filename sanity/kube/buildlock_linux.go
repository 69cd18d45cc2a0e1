package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockBuilds takes the build lock of cacheDir (an exclusive flock(2) on
// <cacheDir>/build.lock), waiting while another process (a build started
// ahead in the background, another test binary) holds it: two `go build`s
// of the same tool block at once would each compile it. The kernel drops
// the lock when its holder dies. The returned function releases it.
func lockBuilds(ctx context.Context, cacheDir string, logf func(format string, args ...any)) (func(), error) {
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(cacheDir, "build.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	start, logged := time.Now(), false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			if logged && logf != nil {
				logf("kube: waited %s for another build of the binaries", time.Since(start).Round(time.Second))
			}
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("kube: lock %s: %w", f.Name(), err)
		}
		if !logged && logf != nil {
			logf("kube: another process builds the binaries in %s; waiting for it", cacheDir)
		}
		logged = true
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("kube: waiting for another build of the binaries in %s: %w", cacheDir, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
