package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/command"
	"github.com/csikit/csikit/mount"
)

// The mappers a node can use.
const (
	// MapperKRBD maps with the kernel's rbd module (`rbd device map`).
	MapperKRBD = "krbd"
	// MapperNBD maps with rbd-nbd (librbd in user space behind /dev/nbdN).
	MapperNBD = "rbd-nbd"
	// MapperFUSE exposes the image as a file with rbd-fuse and attaches a
	// loop device to it: for kernels without rbd and nbd (CI).
	MapperFUSE = "rbd-fuse"
)

// Image is what a mapper maps.
type Image struct {
	// Key identifies the mapping on this node (the volume ID; path-safe).
	Key string
	// Monitors, Pool and Name say where the image is.
	Monitors, Pool, Name string
	// Creds authenticate the map.
	Creds Credentials
	// ReadOnly maps the image read-only.
	ReadOnly bool
	// Device is the device this node's stage recorded for the mapping
	// (krbd, rbd-nbd): Find, Map and Unmap take that device only, if it
	// still maps the image, never another mapping of the image on the
	// host. krbd and rbd-nbd mappings are host-wide, and two node plugins
	// on one host (a test's two nodes) each map the image with a Ceph
	// client of their own; the one fenced must never serve the other.
	// Empty (a record from before devices were recorded): any mapping of
	// the image on the host.
	Device string
}

// hostMapper is a mapper whose mappings every node plugin on the host
// sees (krbd's sysfs, rbd-nbd's list): mapNew maps img without looking
// for a mapping first, for a stage on a node that has none (no stage
// record) while another node plugin on the host may have one.
type hostMapper interface {
	mapNew(ctx context.Context, img Image) (string, error)
}

// Mapper makes an RBD image a local block device. Map is idempotent and
// Find and Unmap find mappings made before a driver restart.
type Mapper interface {
	// Map maps img (or finds its existing mapping) and returns the device.
	Map(ctx context.Context, img Image) (string, error)
	// Find returns the device img is mapped at, if it is.
	Find(ctx context.Context, img Image) (string, bool, error)
	// Unmap removes img's mapping; an unmapped image is fine.
	Unmap(ctx context.Context, img Image) error
}

// keyFile writes the key alone to a new root-only file and returns its
// path and a function removing it.
func keyFile(dir, content string) (string, func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, status.Errorf(codes.Internal, "key directory: %v", err)
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	p := filepath.Join(dir, hex.EncodeToString(b[:]))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", nil, status.Errorf(codes.Internal, "key file: %v", err)
	}
	_, werr := f.WriteString(content)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(p)
		return "", nil, status.Errorf(codes.Internal, "key file: %v", err)
	}
	return p, func() { _ = os.Remove(p) }, nil
}

// runErr turns a failed tool run into a status naming the tool's reason:
// the summary of its stderr when the streams were kept apart (a
// *command.Error, or a *mount.ExitError from mount.ExecRunner), else the
// tail of its output (the tools never print keys, which are only in
// files).
func runErr(err error, out []byte, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return status.Errorf(codes.DeadlineExceeded, "%s: %v", what, err)
	}
	var ee *mount.ExitError
	if errors.As(err, &ee) && (ee.Stdout != nil || ee.Stderr != nil) {
		return status.Errorf(codes.Internal, "%s: %v: %s", what, err, ee.Summary())
	}
	var ce *command.Error
	if errors.As(err, &ce) {
		return status.Errorf(codes.Internal, "%s: %v", what, ce) // names status and cause
	}
	msg := strings.TrimSpace(string(out))
	if len(msg) > 500 {
		msg = msg[len(msg)-500:]
	}
	return status.Errorf(codes.Internal, "%s: %v: %s", what, err, msg)
}

// krbdMapper maps through the kernel rbd module.
type krbdMapper struct {
	run   tools
	keys  string
	sysfs string // /sys/bus/rbd/devices
}

func (m *krbdMapper) Map(ctx context.Context, img Image) (string, error) {
	if dev, ok, err := m.Find(ctx, img); err != nil || ok {
		return dev, err
	}
	return m.mapNew(ctx, img)
}

func (m *krbdMapper) mapNew(ctx context.Context, img Image) (string, error) {
	kf, rm, err := keyFile(m.keys, img.Creds.Key)
	if err != nil {
		return "", err
	}
	defer rm()
	// noshare: a Ceph client of this mapping's own, so a fence
	// (blocklisting its address) cuts off this image alone, not every
	// image the node mapped.
	args := []string{"device", "map", "--id", img.Creds.User, "--keyfile", kf, "-m", img.Monitors, "-o", "noshare"}
	if img.ReadOnly {
		args = append(args, "--read-only")
	}
	args = append(args, img.Pool+"/"+img.Name)
	out, err := m.run(ctx, "rbd", args...)
	if err != nil {
		return "", runErr(err, out, "rbd device map")
	}
	dev := strings.TrimSpace(string(out))
	if !strings.HasPrefix(dev, "/dev/rbd") {
		return "", status.Errorf(codes.Internal, "rbd device map printed %q, not a device", dev)
	}
	return dev, nil
}

// Find reads /sys/bus/rbd/devices/N/{pool,name} (no tool, no keys): of
// img.Device's N alone, when it is set.
func (m *krbdMapper) Find(_ context.Context, img Image) (string, bool, error) {
	maps := func(n string) bool {
		read := func(f string) string {
			b, _ := os.ReadFile(filepath.Join(m.sysfs, n, f))
			return strings.TrimSpace(string(b))
		}
		return read("pool") == img.Pool && read("name") == img.Name && (read("current_snap") == "-" || read("current_snap") == "")
	}
	if img.Device != "" {
		n := strings.TrimPrefix(img.Device, "/dev/rbd")
		if n == img.Device || n == "" || strings.ContainsRune(n, '/') || !maps(n) {
			return "", false, nil
		}
		return img.Device, true, nil
	}
	ents, err := os.ReadDir(m.sysfs)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, status.Errorf(codes.Internal, "read %s: %v", m.sysfs, err)
	}
	for _, e := range ents {
		if maps(e.Name()) {
			return "/dev/rbd" + e.Name(), true, nil
		}
	}
	return "", false, nil
}

func (m *krbdMapper) Unmap(ctx context.Context, img Image) error {
	dev, ok, err := m.Find(ctx, img)
	if err != nil || !ok {
		return err
	}
	out, err := m.run(ctx, "rbd", "device", "unmap", dev)
	return runErr(err, out, "rbd device unmap")
}

// nbdMapper maps through rbd-nbd, on a device it picks itself (nbdpick.go).
type nbdMapper struct {
	run  tools
	keys string
	// state is the node's state directory: the stage records
	// (staged/*.json) live there.
	state string
	// lockFile is the host-wide pick lock (Options.NBDLockFile).
	lockFile string
	// sysfs is /sys/block, module /sys/module/nbd and mountinfo
	// /proc/self/mountinfo (fakes in tests).
	sysfs, module, mountinfo string
}

func (m *nbdMapper) Map(ctx context.Context, img Image) (string, error) {
	if dev, ok, err := m.Find(ctx, img); err != nil || ok {
		return dev, err
	}
	return m.mapNew(ctx, img)
}

func (m *nbdMapper) mapNew(ctx context.Context, img Image) (string, error) {
	kf, rm, err := keyFile(m.keys, img.Creds.Key)
	if err != nil {
		return "", err
	}
	defer rm()
	args := []string{"map", "--id", img.Creds.User, "--keyfile", kf, "-m", img.Monitors}
	if img.ReadOnly {
		args = append(args, "--read-only")
	}
	return m.mapFree(ctx, img, args, img.Pool+"/"+img.Name)
}

// Find looks the image up in `rbd-nbd list-mapped`: at img.Device alone,
// when it is set.
func (m *nbdMapper) Find(ctx context.Context, img Image) (string, bool, error) {
	out, err := m.run(ctx, "rbd-nbd", "list-mapped", "--format", "json")
	if err != nil {
		return "", false, runErr(err, out, "rbd-nbd list-mapped")
	}
	var list []struct{ Pool, Image, Snap, Device string }
	if err := json.Unmarshal(out, &list); err != nil {
		return "", false, status.Errorf(codes.Internal, "rbd-nbd list-mapped: %v", err)
	}
	for _, e := range list {
		if e.Pool == img.Pool && e.Image == img.Name && (e.Snap == "" || e.Snap == "-") && (img.Device == "" || e.Device == img.Device) {
			return e.Device, true, nil
		}
	}
	return "", false, nil
}

func (m *nbdMapper) Unmap(ctx context.Context, img Image) error {
	dev, ok, err := m.Find(ctx, img)
	if err != nil || !ok {
		return err
	}
	out, err := m.run(ctx, "rbd-nbd", "unmap", dev)
	return runErr(err, out, "rbd-nbd unmap")
}

// fuseMapper exposes the image as <dir>/<key>/<image> with rbd-fuse and
// attaches a loop device to that file. rbd-fuse runs as a daemon, so the
// mapping outlives a driver restart; Find looks it up by backing file.
type fuseMapper struct {
	run  tools
	keys string
	dir  string
}

func (m *fuseMapper) mountPoint(img Image) string { return filepath.Join(m.dir, img.Key) }
func (m *fuseMapper) file(img Image) string       { return filepath.Join(m.mountPoint(img), img.Name) }

// isMount reports whether p is a mount point, from /proc/self/mountinfo:
// an lstat of an rbd-fuse mount point asks the daemon, and a fenced
// rbd-fuse never answers.
func isMount(p string) bool { return mountedAt(p) }

func (m *fuseMapper) Map(ctx context.Context, img Image) (dev string, err error) {
	if d, ok, err := m.Find(ctx, img); err != nil || ok {
		return d, err
	}
	mp := m.mountPoint(img)
	if err := os.MkdirAll(mp, 0o700); err != nil {
		return "", status.Errorf(codes.Internal, "rbd-fuse mount point: %v", err)
	}
	mounted := isMount(mp)
	defer func() {
		if err != nil && !mounted {
			_ = unix.Unmount(mp, unix.MNT_DETACH)
			_ = os.Remove(mp)
		}
	}()
	if !mounted {
		if err := m.startFuse(ctx, img, mp); err != nil {
			return "", err
		}
	}
	dev, err = block.AttachLoop(ctx, m.file(img), block.LoopOptions{ReadOnly: img.ReadOnly})
	if err != nil {
		return "", err
	}
	return dev, nil
}

// startFuse mounts the image's rbd-fuse file system. rbd-fuse runs in the
// foreground of its own session, so its PID is known (recorded beside the
// mount point) and Unmap can wait for it to let go of the image. The key
// sits in a root-only keyring only until rbd-fuse has connected (on first
// access), then it is removed.
func (m *fuseMapper) startFuse(ctx context.Context, img Image, mp string) error {
	kr, rmKey, err := keyFile(m.keys, "[client."+img.Creds.User+"]\n\tkey = "+img.Creds.Key+"\n")
	if err != nil {
		return err
	}
	defer rmKey()
	conf, rmConf, err := keyFile(m.keys, "[global]\nmon_host = "+img.Monitors+"\nkeyring = "+kr+"\nadmin_socket =\nlog_file =\n")
	if err != nil {
		return err
	}
	defer rmConf()
	cmd := exec.Command("rbd-fuse", "-f", "-c", conf, "--id", img.Creds.User, "-p", img.Pool, "-r", img.Name, mp)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return status.Errorf(codes.Internal, "start rbd-fuse: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	_ = os.WriteFile(m.pidFile(img), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	fail := func(err error) error {
		_ = unix.Unmount(mp, unix.MNT_DETACH)
		_ = cmd.Process.Kill()
		<-exited
		_ = os.Remove(m.pidFile(img))
		return err
	}
	// The first stat connects; wait until the image's file answers.
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			return fail(status.Errorf(codes.Internal, "rbd-fuse exited before exposing image %s/%s", img.Pool, img.Name))
		default:
		}
		if isMount(mp) {
			if _, serr := os.Stat(m.file(img)); serr == nil {
				return nil
			} else if time.Now().After(deadline) || ctx.Err() != nil || errors.Is(serr, unix.ENOTCONN) {
				return fail(status.Errorf(codes.Internal, "rbd-fuse did not expose image %s/%s: %v", img.Pool, img.Name, serr))
			}
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			return fail(status.Errorf(codes.Internal, "rbd-fuse did not mount image %s/%s", img.Pool, img.Name))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m *fuseMapper) pidFile(img Image) string { return m.mountPoint(img) + ".pid" }

// waitExit waits for the recorded rbd-fuse of img to exit (it closes the
// image, and its watch, on the way out), if it is still that process.
func (m *fuseMapper) waitExit(img Image) {
	b, err := os.ReadFile(m.pidFile(img))
	if err != nil {
		return
	}
	pid, _ := strconv.Atoi(string(b))
	for deadline := time.Now().Add(10 * time.Second); pid > 0 && time.Now().Before(deadline); {
		cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil || !strings.Contains(string(cmdline), m.mountPoint(img)) {
			break
		}
		if st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && strings.Contains(string(st), ") Z ") {
			break // exited, not yet reaped
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = os.Remove(m.pidFile(img))
}

func (m *fuseMapper) Find(ctx context.Context, img Image) (string, bool, error) {
	if !isMount(m.mountPoint(img)) {
		return "", false, nil
	}
	if !m.answers(img) {
		return "", false, status.Errorf(codes.FailedPrecondition, "rbd-fuse of image %s/%s does not answer (its Ceph client was probably fenced, blocklisted after the volume moved to another node): unstage the volume", img.Pool, img.Name)
	}
	dev, ok, err := block.FindLoop(ctx, m.file(img))
	if err != nil && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTCONN)) {
		return "", false, nil
	}
	return dev, ok, err
}

func (m *fuseMapper) Unmap(ctx context.Context, img Image) error {
	mp := m.mountPoint(img)
	if m.reapHung(img) {
		// Fenced: the daemon is killed, its mount dead (ENOTCONN); the
		// loop device is found by its path alone and both let go.
		if dev, ok := m.loopOfDeadFuse(img); ok {
			if err := block.DetachLoop(ctx, dev); err != nil {
				return err
			}
		}
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return status.Errorf(codes.Internal, "unmount the dead rbd-fuse at %s: %v", mp, err)
		}
		_ = os.Remove(m.pidFile(img))
	} else if isMount(mp) {
		if dev, ok, err := block.FindLoop(ctx, m.file(img)); err == nil && ok {
			if err := block.DetachLoop(ctx, dev); err != nil {
				return err
			}
		}
		// A detached loop device lets go of its file asynchronously (when
		// its last opener, e.g. a udev probe, closes it): retry a while.
		for deadline := time.Now().Add(10 * time.Second); ; {
			err := unix.Unmount(mp, 0)
			if err == nil || errors.Is(err, unix.EINVAL) {
				break
			}
			if !errors.Is(err, unix.EBUSY) {
				return status.Errorf(codes.Internal, "unmount rbd-fuse at %s: %v", mp, err)
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return status.Errorf(codes.FailedPrecondition, "unmount rbd-fuse at %s: %v", mp, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	m.waitExit(img)
	if err := os.Remove(mp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return status.Errorf(codes.Internal, "remove %s: %v", mp, err)
	}
	return nil
}
