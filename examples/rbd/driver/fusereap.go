package driver

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fuseAnswerTimeout is how long the fuse mapper waits for rbd-fuse to
// answer a stat of its image file before it takes it for hung.
const fuseAnswerTimeout = 5 * time.Second

// probe stats img's image file, waiting at most fuseAnswerTimeout:
// answered is false when rbd-fuse did not answer in time, err is the
// stat's error when it did (ENOTCONN: the daemon is gone). A fenced
// rbd-fuse (its Ceph client blocklisted) never answers again: its getattr
// waits forever inside librbd. The stat runs in a goroutine, which stays
// blocked (one thread) until the daemon dies; reapHung kills it.
func (m *fuseMapper) probe(img Image) (answered bool, err error) {
	done := make(chan error, 1)
	go func() {
		var st unix.Stat_t
		done <- unix.Stat(m.file(img), &st)
	}()
	t := time.NewTimer(fuseAnswerTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return true, err
	case <-t.C:
		return false, nil
	}
}

// answers reports whether img's rbd-fuse answers a stat of its file.
func (m *fuseMapper) answers(img Image) bool {
	ok, _ := m.probe(img)
	return ok
}

// reapHung reports whether img's rbd-fuse mount is dead: mounted, but its
// daemon gone (the mount answers ENOTCONN) or no longer answering (it was
// fenced, or its cluster is gone). A daemon that does not answer is
// killed: nothing it holds can reach the image any more, and until it
// dies every stat, unmount or loop I/O on its file hangs. The kill aborts
// its FUSE connection, so those fail at once (ENOTCONN, EIO) and the
// unstage can undo the mapping.
func (m *fuseMapper) reapHung(img Image) bool {
	mp := m.mountPoint(img)
	if !isMount(mp) {
		return false
	}
	answered, err := m.probe(img)
	if answered {
		return errors.Is(err, unix.ENOTCONN)
	}
	pid := m.fusePID(img)
	if pid <= 0 {
		return true
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if m.fusePID(img) != pid {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// fusePID is the PID of img's running rbd-fuse (from its PID file,
// checked against the process's command line), or 0.
func (m *fuseMapper) fusePID(img Image) int {
	b, err := os.ReadFile(m.pidFile(img))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 {
		return 0
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.Contains(string(cmdline), m.mountPoint(img)) {
		return 0
	}
	if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && strings.Contains(string(st), ") Z ") {
		return 0
	}
	return pid
}

// loopOfDeadFuse finds the loop device on img's file from sysfs alone
// (its backing_file path), for a mapping whose rbd-fuse is gone: the file
// cannot be stat'ed to confirm it by inode.
func (m *fuseMapper) loopOfDeadFuse(img Image) (string, bool) {
	want := m.file(img)
	ents, _ := os.ReadDir("/sys/block")
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/sys/block", e.Name(), "loop", "backing_file"))
		if err == nil && backingPath(string(b)) == want {
			return "/dev/" + e.Name(), true
		}
	}
	return "", false
}

// backingPath is the path in a loop device's sysfs backing_file. The
// kernel appends " (deleted)" to a file whose dentry is gone, which is what
// a dead rbd-fuse's file looks like: once the daemon is killed, the next
// lookup fails to revalidate the dentry (ENOTCONN) and FUSE invalidates
// it. Without the trim, the loop device of a fenced mapping was never
// found and stayed attached after the unstage.
func backingPath(sysfs string) string {
	return strings.TrimSuffix(strings.TrimSuffix(sysfs, "\n"), " (deleted)")
}

// mountedAt reports whether /proc/self/mountinfo lists a mount at p.
func mountedAt(p string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountinfo(fields[4]) == p {
			return true
		}
	}
	return false
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
