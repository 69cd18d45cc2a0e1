package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/internal/testenv"
)

// fakeNBDHost is a host's nbd devices in a fake /sys/block, a fake
// mountinfo and a fake rbd-nbd that behaves like its ioctl mode: without
// --device it takes the lowest device with no pid (the stale, still
// mounted one too); with --device it fails "busy" if the device is
// connected, else connects it.
type fakeNBDHost struct {
	t                   *testing.T
	sysfs, mountinfo    string
	state, module, keys string
	lockFile            string // the host-wide pick lock
	calls               []string
	takenBy             map[string]bool // --device taken by "another mapper" as the map runs
}

func newFakeNBDHost(t *testing.T, n int) *fakeNBDHost {
	f := &fakeNBDHost{t: t, sysfs: t.TempDir(), state: t.TempDir(), keys: t.TempDir(), takenBy: map[string]bool{}}
	f.module = filepath.Join(t.TempDir(), "nbd")
	f.lockFile = filepath.Join(t.TempDir(), "run", "nbd-pick.lock")
	f.mountinfo = filepath.Join(t.TempDir(), "mountinfo")
	must(t, os.MkdirAll(filepath.Join(f.module, "parameters"), 0o755))
	must(t, os.WriteFile(filepath.Join(f.module, "parameters", "nbds_max"), []byte("16\n"), 0o644))
	for i := range n {
		d := filepath.Join(f.sysfs, "nbd"+strconv.Itoa(i))
		must(t, os.MkdirAll(filepath.Join(d, "holders"), 0o755))
		must(t, os.WriteFile(filepath.Join(d, "dev"), []byte("43:"+strconv.Itoa(i*32)+"\n"), 0o644))
		must(t, os.WriteFile(filepath.Join(d, "size"), []byte("0\n"), 0o644))
	}
	must(t, os.WriteFile(f.mountinfo, []byte("22 1 0:21 / /proc rw - proc proc rw\n"), 0o644))
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fakeNBDHost) connect(n string) {
	must(f.t, os.WriteFile(filepath.Join(f.sysfs, n, "pid"), []byte("4242\n"), 0o644))
	must(f.t, os.WriteFile(filepath.Join(f.sysfs, n, "size"), []byte("2097152\n"), 0o644))
}

func (f *fakeNBDHost) mount(line string) {
	b, err := os.ReadFile(f.mountinfo)
	must(f.t, err)
	must(f.t, os.WriteFile(f.mountinfo, append(b, line+"\n"...), 0o644))
}

func (f *fakeNBDHost) run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.calls = append(f.calls, name+" "+strings.Join(args, " "))
	if name != "rbd-nbd" || len(args) == 0 || args[0] != "map" {
		return nil, errors.New("unexpected")
	}
	if i := slices.Index(args, "--device"); i >= 0 {
		n := strings.TrimPrefix(args[i+1], "/dev/")
		if f.takenBy[n] {
			f.connect(n) // another node plugin's rbd-nbd got there first
		}
		if _, err := os.Stat(filepath.Join(f.sysfs, n, "pid")); err == nil {
			return []byte("rbd-nbd: failed to map: (16) Device or resource busy\n"), errors.New("exit status 1")
		}
		f.connect(n)
		return []byte(args[i+1] + "\n"), nil
	}
	ents, _ := os.ReadDir(f.sysfs)
	for i := range ents {
		n := "nbd" + strconv.Itoa(i)
		if _, err := os.Stat(filepath.Join(f.sysfs, n, "pid")); err != nil {
			f.connect(n)
			return []byte("/dev/" + n + "\n"), nil
		}
	}
	return nil, errors.New("no device")
}

func (f *fakeNBDHost) mapper() *nbdMapper {
	return &nbdMapper{run: f.run, keys: f.keys, state: f.state, lockFile: f.lockFile, sysfs: f.sysfs, module: f.module, mountinfo: f.mountinfo}
}

// TestNBDMapTakesAFreeDevice: the VM lane's split-brain trial 13 of 20
// had node B's rbd-nbd handed /dev/nbd0 while node A's aborted ext4 was
// still mounted on it. The mapper now picks the device itself: never a
// mounted one (by device number or source), a connected one, one with
// holders, or one another stage recorded.
func TestNBDMapTakesAFreeDevice(t *testing.T) {
	f := newFakeNBDHost(t, 8)
	// nbd0: the stale mapping's device: disconnected, ext4 still mounted.
	f.mount("30 1 43:0 / /var/lib/kubelet/staging/a rw - ext4 /dev/nbd0 rw,errors=remount-ro")
	f.connect("nbd1")
	must(t, os.WriteFile(filepath.Join(f.sysfs, "nbd2", "holders", "dm-0"), nil, 0o644))
	// nbd3: recorded by another stage of this node (its rbd-nbd restarting).
	must(t, os.MkdirAll(filepath.Join(f.state, "staged"), 0o700))
	must(t, os.WriteFile(filepath.Join(f.state, "staged", "other.json"), []byte(`{"pool":"p","image":"x","mapper":"rbd-nbd","device":"/dev/nbd3"}`), 0o600))
	// This stage's own (stale) record names nbd5: not a reason to skip it.
	must(t, os.WriteFile(filepath.Join(f.state, "staged", "k.json"), []byte(`{"pool":"p","image":"img","mapper":"rbd-nbd","device":"/dev/nbd5"}`), 0o600))
	// nbd4: a partition of it mounted, seen by source only.
	must(t, os.MkdirAll(filepath.Join(f.sysfs, "nbd4", "nbd4p1"), 0o755))
	f.mount("31 1 259:9 / /mnt/p rw - xfs /dev/nbd4p1 rw")

	img := Image{Key: "k", Monitors: "m", Pool: "p", Name: "img", Creds: Credentials{User: "u", Key: "secret"}}
	dev, err := f.mapper().mapNew(context.Background(), img)
	if err != nil {
		t.Fatal(err)
	}
	if dev != "/dev/nbd5" {
		t.Fatalf("mapped on %s; want /dev/nbd5, the first free device (calls %q)", dev, f.calls)
	}
	if len(f.calls) != 1 || !strings.Contains(f.calls[0], " --device /dev/nbd5 p/img") {
		t.Fatalf("calls %q; want one map with --device /dev/nbd5", f.calls)
	}
	if _, err := os.Stat(f.lockFile); err != nil {
		t.Fatalf("no pick lock file: %v", err)
	}
}

// TestNBDMapRetriesATakenDevice: another mapper (a second node plugin on
// the host) takes the picked device between the pick and the map; the
// map fails busy and the next free device is taken.
func TestNBDMapRetriesATakenDevice(t *testing.T) {
	f := newFakeNBDHost(t, 3)
	f.takenBy["nbd0"] = true
	img := Image{Key: "k", Pool: "p", Name: "img"}
	dev, err := f.mapper().mapNew(context.Background(), img)
	if err != nil || dev != "/dev/nbd1" {
		t.Fatalf("mapNew: %q, %v; want /dev/nbd1 after nbd0 was taken (calls %q)", dev, err, f.calls)
	}
	if len(f.calls) != 2 {
		t.Fatalf("calls %q; want two maps", f.calls)
	}
}

// TestNBDMapOtherFailureIsNotRetried: a map that fails for its own reason
// (auth, the cluster) on a device still free is reported, not repeated
// on every device.
func TestNBDMapOtherFailureIsNotRetried(t *testing.T) {
	f := newFakeNBDHost(t, 3)
	m := f.mapper()
	m.run = func(_ context.Context, name string, args ...string) ([]byte, error) {
		f.calls = append(f.calls, name+" "+strings.Join(args, " "))
		return []byte("rbd-nbd: failed to open image: (1) Operation not permitted\n"), errors.New("exit status 1")
	}
	_, err := m.mapNew(context.Background(), Image{Key: "k", Pool: "p", Name: "img"})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "Operation not permitted") || len(f.calls) != 1 {
		t.Fatalf("mapNew: %v after %q; want Internal naming the cause, one map", err, f.calls)
	}
}

// TestNBDMapNoFreeDevice: every device busy is ResourceExhausted naming
// nbds_max, and no map runs.
func TestNBDMapNoFreeDevice(t *testing.T) {
	f := newFakeNBDHost(t, 2)
	f.connect("nbd0")
	f.mount("30 1 43:32 / /mnt/x rw - ext4 /dev/nbd1 rw")
	_, err := f.mapper().mapNew(context.Background(), Image{Key: "k", Pool: "p", Name: "img"})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "nbds_max=16") {
		t.Fatalf("mapNew: %v; want ResourceExhausted naming nbds_max=16", err)
	}
	if len(f.calls) != 0 {
		t.Fatalf("ran %q with no free device", f.calls)
	}
}

// TestNBDMapWithoutTheModule: before the nbd module is loaded no device
// can be stale; rbd-nbd loads it and picks.
func TestNBDMapWithoutTheModule(t *testing.T) {
	f := newFakeNBDHost(t, 0)
	must(t, os.RemoveAll(f.module))
	m := f.mapper()
	m.run = func(_ context.Context, name string, args ...string) ([]byte, error) {
		f.calls = append(f.calls, name+" "+strings.Join(args, " "))
		return []byte("/dev/nbd0\n"), nil
	}
	dev, err := m.mapNew(context.Background(), Image{Key: "k", Pool: "p", Name: "img"})
	if err != nil || dev != "/dev/nbd0" || len(f.calls) != 1 || strings.Contains(f.calls[0], "--device") {
		t.Fatalf("mapNew: %q, %v, calls %q; want one map without --device", dev, err, f.calls)
	}
}

// TestNBDPickLockWaits: the pick lock is a real flock; a stage waiting
// on it gives up with its context.
func TestNBDPickLockWaits(t *testing.T) {
	f := newFakeNBDHost(t, 2)
	must(t, os.MkdirAll(filepath.Dir(f.lockFile), 0o700))
	lf, err := os.OpenFile(f.lockFile, os.O_RDWR|os.O_CREATE, 0o600)
	must(t, err)
	defer lf.Close()
	must(t, unix.Flock(int(lf.Fd()), unix.LOCK_EX))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = f.mapper().mapNew(ctx, Image{Key: "k", Pool: "p", Name: "img"})
	if status.Code(err) != codes.DeadlineExceeded || len(f.calls) != 0 {
		t.Fatalf("mapNew under a held lock: %v, calls %q; want DeadlineExceeded and no map", err, f.calls)
	}
	must(t, unix.Flock(int(lf.Fd()), unix.LOCK_UN))
	if dev, err := f.mapper().mapNew(context.Background(), Image{Key: "k", Pool: "p", Name: "img"}); err != nil || dev != "/dev/nbd0" {
		t.Fatalf("mapNew after the lock was released: %q, %v", dev, err)
	}
}

// TestNBDPickLockIsHostWide: two node plugins on one host, each with its
// own state directory, pick under one lock: while one holds it the
// other's map waits (and gives up with its context) instead of picking
// the same free /dev/nbdN; after it, each takes its own device. With the
// lock in the state directory, as before, B mapped on nbd0 while A held
// its lock about to map there.
func TestNBDPickLockIsHostWide(t *testing.T) {
	f := newFakeNBDHost(t, 4)
	a := f.mapper()
	b := f.mapper()
	b.state = t.TempDir() // a node plugin of its own
	unlock, err := a.lock(context.Background())
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if dev, err := b.mapNew(ctx, Image{Key: "kb", Pool: "p", Name: "b"}); status.Code(err) != codes.DeadlineExceeded || len(f.calls) != 0 {
		t.Fatalf("B's map while A holds the pick lock: %q, %v, calls %q; want DeadlineExceeded and no map", dev, err, f.calls)
	}
	unlock()
	devB, err := b.mapNew(context.Background(), Image{Key: "kb", Pool: "p", Name: "b"})
	must(t, err)
	devA, err := a.mapNew(context.Background(), Image{Key: "ka", Pool: "p", Name: "a"})
	must(t, err)
	if devA == devB || devB != "/dev/nbd0" || devA != "/dev/nbd1" {
		t.Fatalf("B mapped on %s, A on %s; want nbd0 and nbd1", devB, devA)
	}
}

// TestNBDPickLockRefusesForeignFile: the lock file is opened without
// following a symlink and must be root's regular file: a file another
// user created first could be locked by them forever.
func TestNBDPickLockRefusesForeignFile(t *testing.T) {
	testenv.RequireRoot(t, "to make a file of another user")
	f := newFakeNBDHost(t, 2)
	must(t, os.MkdirAll(filepath.Dir(f.lockFile), 0o700))
	must(t, os.WriteFile(f.lockFile, nil, 0o666))
	must(t, os.Chown(f.lockFile, 65534, 65534))
	_, err := f.mapper().mapNew(context.Background(), Image{Key: "k", Pool: "p", Name: "img"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), f.lockFile) || len(f.calls) != 0 {
		t.Fatalf("map under a lock file of uid 65534: %v, calls %q; want FailedPrecondition naming the file, no map", err, f.calls)
	}
	must(t, os.Remove(f.lockFile))
	must(t, os.Symlink(filepath.Join(t.TempDir(), "elsewhere"), f.lockFile))
	_, err = f.mapper().mapNew(context.Background(), Image{Key: "k", Pool: "p", Name: "img"})
	if status.Code(err) != codes.FailedPrecondition || len(f.calls) != 0 {
		t.Fatalf("map under a symlinked lock file: %v, calls %q; want FailedPrecondition, no map", err, f.calls)
	}
}
