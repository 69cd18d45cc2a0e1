package driver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rbd-nbd's ioctl mode, left to pick a device, can be handed a /dev/nbdN
// whose previous mapping died under a mount: a frozen rbd-nbd with I/O in
// flight past the kernel's nbd timeout has its socket shut down, and the
// aborted file system stays mounted on the device. A new volume's mapping
// there would sit under a stale mount. So the mapper picks the device
// itself and passes it with --device: only a device that is not
// connected, not mounted, not held, and not recorded by another stage of
// this node, under a host-wide lock (Options.NBDLockFile) so that no two
// stages on the host pick the same one — the node's own, and those of
// other node plugins on the host with state directories of their own; a
// map that fails because another mapper (one that takes no such lock)
// took the device meanwhile moves on to the next.

// DefaultNBDLockFile is Options.NBDLockFile's default: a host path, in a
// root-only directory (not the world-writable /run/lock, where any user
// could create the file first and hold its lock).
const DefaultNBDLockFile = "/run/csikit-rbd/nbd-pick.lock"

// mapFree runs `rbd-nbd <args> --device /dev/nbdN <spec>` on the first
// free nbd device, and the next when the map fails because the device was
// taken meanwhile. Without the nbd module loaded yet no device can be
// stale: rbd-nbd loads it and picks.
func (m *nbdMapper) mapFree(ctx context.Context, img Image, args []string, spec string) (string, error) {
	unlock, err := m.lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	devs, err := m.devices()
	if err != nil {
		return "", err
	}
	if len(devs) == 0 {
		if _, err := os.Stat(m.module); errors.Is(err, fs.ErrNotExist) {
			out, err := m.run(ctx, "rbd-nbd", append(slices.Clone(args), spec)...)
			if err != nil {
				return "", runErr(err, out, "rbd-nbd map")
			}
			return strings.TrimSpace(string(out)), nil
		}
	}
	recorded := m.recordedDevices(img.Key)
	var lastErr error
	tried := 0
	for _, n := range devs {
		dev := "/dev/" + n
		if recorded[dev] || !m.free(n) {
			continue
		}
		tried++
		out, err := m.run(ctx, "rbd-nbd", append(slices.Clone(args), "--device", dev, spec)...)
		if err == nil {
			got := strings.TrimSpace(string(out))
			if got != dev {
				return "", status.Errorf(codes.Internal, "rbd-nbd map --device %s printed %q", dev, got)
			}
			return dev, nil
		}
		if ctx.Err() != nil {
			return "", runErr(err, out, "rbd-nbd map")
		}
		lastErr = runErr(err, out, "rbd-nbd map --device "+dev)
		// Taken meanwhile (another node plugin's rbd-nbd, another
		// state directory's lock): the next one. Any other failure is
		// the map's own.
		if m.free(n) && !strings.Contains(strings.ToLower(lastErr.Error()), "busy") {
			return "", lastErr
		}
	}
	nbdsMax := strings.TrimSpace(readSmall(filepath.Join(m.module, "parameters", "nbds_max")))
	if nbdsMax == "" {
		nbdsMax = "?"
	}
	msg := "no free nbd device for image " + img.Pool + "/" + img.Name + ": all " + strconv.Itoa(len(devs)) +
		" /dev/nbdN (nbd module parameter nbds_max=" + nbdsMax + ") are connected, mounted, held or recorded by another stage; " +
		"unstage volumes or load the nbd module with a larger nbds_max"
	if tried > 0 {
		msg += " (the last map failed: " + lastErr.Error() + ")"
	}
	return "", status.Error(codes.ResourceExhausted, msg)
}

// lock takes the host-wide pick lock, waiting for it as long as ctx
// allows. The lock file is opened without following a symlink and must
// be a regular file of this process's user (root): one someone else
// created could be held by them forever.
func (m *nbdMapper) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(m.lockFile), 0o700); err != nil {
		return nil, status.Errorf(codes.Internal, "nbd pick lock: %v", err)
	}
	f, err := os.OpenFile(m.lockFile, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "nbd pick lock (--nbd-lock-file): %v", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		_ = f.Close()
		return nil, status.Errorf(codes.Internal, "nbd pick lock: %v", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() {
		_ = f.Close()
		return nil, status.Errorf(codes.FailedPrecondition, "nbd pick lock %s is not a regular file of uid %d (mode %o, uid %d): remove it, or choose another path with --nbd-lock-file", m.lockFile, os.Geteuid(), st.Mode, st.Uid)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			_ = f.Close()
			return nil, status.Errorf(codes.Internal, "nbd pick lock: %v", err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, status.Errorf(codes.DeadlineExceeded, "wait for the nbd pick lock %s: %v", f.Name(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// devices lists the nbdN of sysfs in numeric order.
func (m *nbdMapper) devices() ([]string, error) {
	ents, err := os.ReadDir(m.sysfs)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "read %s: %v", m.sysfs, err)
	}
	var devs []string
	for _, e := range ents {
		if n, ok := strings.CutPrefix(e.Name(), "nbd"); ok {
			if _, err := strconv.Atoi(n); err == nil {
				devs = append(devs, e.Name())
			}
		}
	}
	slices.SortFunc(devs, func(a, b string) int {
		x, _ := strconv.Atoi(a[3:])
		y, _ := strconv.Atoi(b[3:])
		return x - y
	})
	return devs, nil
}

// free reports whether nbd device n (e.g. "nbd3") may take a new mapping:
// not connected (no pid, size 0), no holders, and neither it nor a
// partition of it mounted. Anything unreadable counts as not free.
func (m *nbdMapper) free(n string) bool {
	dir := filepath.Join(m.sysfs, n)
	if _, err := os.Lstat(filepath.Join(dir, "pid")); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if size := strings.TrimSpace(readSmall(filepath.Join(dir, "size"))); size != "0" {
		return false
	}
	holders, err := os.ReadDir(filepath.Join(dir, "holders"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) || len(holders) > 0 {
		return false
	}
	nums := map[string]bool{}
	if d := strings.TrimSpace(readSmall(filepath.Join(dir, "dev"))); d != "" {
		nums[d] = true
	} else {
		return false
	}
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), n+"p") {
				if d := strings.TrimSpace(readSmall(filepath.Join(dir, e.Name(), "dev"))); d != "" {
					nums[d] = true
				}
			}
		}
	}
	f, err := os.Open(m.mountinfo)
	if err != nil {
		return false
	}
	defer f.Close()
	dev := "/dev/" + n
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		if nums[fields[2]] {
			return false
		}
		if i := slices.Index(fields, "-"); i >= 0 && i+2 < len(fields) {
			src := fields[i+2]
			if src == dev || strings.HasPrefix(src, dev+"p") {
				return false
			}
		}
	}
	return sc.Err() == nil
}

// recordedDevices returns the devices this node's stage records other
// than key's name: a device another stage recorded is that stage's, even
// while it looks free (its rbd-nbd restarting).
func (m *nbdMapper) recordedDevices(key string) map[string]bool {
	out := map[string]bool{}
	dir := filepath.Join(m.state, "staged")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || name == key {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var r stageRecord
		if json.Unmarshal(b, &r) == nil && r.Device != "" {
			out[r.Device] = true
		}
	}
	return out
}

// readSmall reads a small sysfs-like file; "" when it cannot.
func readSmall(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return string(b)
}
