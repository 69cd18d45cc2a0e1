package sanity

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// splitBrainSupported says why the area cannot run here, if it cannot.
func splitBrainSupported() error {
	for _, tool := range []string{"sh", "date", "dd"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the split-brain writer needs %s: %v", tool, err)
		}
	}
	return nil
}

// writeSynced writes b to path (created or truncated) and syncs the file
// and its directory.
func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readDirect reads the whole record file at path past this node's page
// cache (O_DIRECT), so that what another node wrote to the device shows;
// where O_DIRECT is refused it drops the file's cached pages and reads.
func readDirect(path string) ([]byte, error) {
	const size = sbRecord * sbSlots
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err == nil {
		defer unix.Close(fd)
		raw := make([]byte, size+4096)
		off := int(uintptr(unsafe.Pointer(&raw[0])) & 4095)
		buf := raw[(4096-off)%4096:][:size]
		n, rerr := unix.Pread(fd, buf, 0)
		if rerr == nil {
			return buf[:n], nil
		}
		if !errors.Is(rerr, unix.EINVAL) {
			return nil, rerr
		}
	} else if !errors.Is(err, unix.EINVAL) {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	b := make([]byte, size+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && n == 0 {
		return nil, err
	}
	return b[:n], nil
}

// writer is the process group stamping records into node A's file.
type writer struct {
	cmd  *exec.Cmd
	pgid int
	done chan struct{}
	err  error

	mu     sync.Mutex
	killed bool
}

// startWriter starts sbWriterScript on path in a process group of its
// own.
func startWriter(path string) (*writer, error) {
	cmd := exec.Command("sh", "-c", sbWriterScript, "sh", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &writer{cmd: cmd, pgid: cmd.Process.Pid, done: make(chan struct{})}
	go func() { w.err = cmd.Wait(); close(w.done) }()
	return w, nil
}

// waitProgress waits until the file shows a stamp of at least seq.
func (w *writer) waitProgress(path string, seq int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-w.done:
			return fmt.Errorf("the writer exited: %v", w.err)
		default:
		}
		if b, err := os.ReadFile(path); err == nil {
			if stamps, _ := sbParse(b); len(stamps) > 0 {
				for _, st := range stamps {
					if st.seq >= seq {
						return nil
					}
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no stamp %d in %s after %s", seq, path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *writer) signal(sig syscall.Signal) error {
	select {
	case <-w.done:
		return fmt.Errorf("the writer exited before it was frozen: %v", w.err)
	default:
	}
	return syscall.Kill(-w.pgid, sig)
}

// stop freezes the writer's whole group.
func (w *writer) stop() error { return w.signal(syscall.SIGSTOP) }

// cont resumes it.
func (w *writer) cont() error {
	select {
	case <-w.done:
		return nil
	default:
	}
	return syscall.Kill(-w.pgid, syscall.SIGCONT)
}

// kill kills the group and waits for the writer, at most timeout.
func (w *writer) kill(timeout time.Duration) error {
	w.mu.Lock()
	first := !w.killed
	w.killed = true
	w.mu.Unlock()
	if first {
		_ = syscall.Kill(-w.pgid, syscall.SIGKILL)
	}
	deadline := time.After(timeout)
	select {
	case <-w.done:
	case <-deadline:
		return fmt.Errorf("the writer (process group %d) did not exit within %s of SIGKILL: blocked in I/O on the volume", w.pgid, timeout)
	}
	// The shell is gone; its children (dd in the middle of a write) may
	// still hold the file open until they are reaped.
	for syscall.Kill(-w.pgid, 0) == nil {
		select {
		case <-deadline:
			return fmt.Errorf("processes of the writer's group %d still run %s after SIGKILL: blocked in I/O on the volume", w.pgid, timeout)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// StopProcesses returns a SplitBrainConfig.Freeze that stops (SIGSTOP)
// the processes targets name — a decimal PID, or a name matched against
// every process's /proc/PID/comm (the executable's name, cut at 15
// bytes) — and whose resume sends them SIGCONT. A name that matches no
// process is an error: a freeze that stops nothing would prove nothing.
// Never name the process that serves the Controller service: the
// harness calls it while node A is frozen.
func StopProcesses(targets ...string) func(ctx context.Context) (resume func() error, err error) {
	return func(ctx context.Context) (func() error, error) {
		pids, err := findProcesses(targets)
		if err != nil {
			return nil, err
		}
		var stopped []int
		resume := func() error {
			var errs []error
			for _, pid := range stopped {
				if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
					errs = append(errs, fmt.Errorf("SIGCONT %d: %w", pid, err))
				}
			}
			return errors.Join(errs...)
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				return nil, errors.Join(fmt.Errorf("SIGSTOP %d: %w", pid, err), resume())
			}
			stopped = append(stopped, pid)
		}
		return resume, nil
	}
}

// findProcesses resolves PIDs and process names to PIDs.
func findProcesses(targets []string) ([]int, error) {
	var pids []int
	var names []string
	for _, t := range targets {
		if pid, err := strconv.Atoi(t); err == nil && pid > 0 {
			pids = append(pids, pid)
		} else {
			names = append(names, t)
		}
	}
	if len(names) == 0 {
		return pids, nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	found := map[string]bool{}
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		c := string(bytes.TrimSpace(comm))
		for _, n := range names {
			if c == n || (len(n) > 15 && c == n[:15]) {
				pids = append(pids, pid)
				found[n] = true
			}
		}
	}
	var missing []string
	for _, n := range names {
		if !found[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no process named %s", strings.Join(missing, ", "))
	}
	return pids, nil
}
