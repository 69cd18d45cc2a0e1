//go:build linux

package sanity_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/command"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/sanity"
)

// sbDriver is a driver whose volumes are ext4 images that every node of
// this host stages through a loop device of its own, as nodes of a
// shared block storage would: two nodes that stage one volume at once
// mount one filesystem twice. With fence set it is a csikit.Fencer: a
// node is cut off a volume by shrinking its loop device to one sector,
// after which its writes fail with EIO.
type sbDriver struct {
	dir string
	fs  string // "ext4" (default) or "xfs"
	// lateFence makes ControllerUnpublishVolume fence the node itself,
	// but only lateFence after answering OK: the bug the rule forbids.
	lateFence time.Duration

	mu    sync.Mutex
	loops map[string]string // volume/node → loop device of the node's stage
	cut   map[string]bool   // volume/node fenced
}

func newSBDriver(dir string) *sbDriver {
	return &sbDriver{dir: dir, loops: map[string]string{}, cut: map[string]bool{}}
}

func (d *sbDriver) img(id string) string { return filepath.Join(d.dir, id+".img") }

func (d *sbDriver) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	h := sha256.Sum256([]byte(r.GetName()))
	id := "sb" + hex.EncodeToString(h[:8])
	size := max(r.GetCapacityRange().GetRequiredBytes(), 32<<20)
	mkfs := []string{"mkfs.ext4", "-q", "-F"}
	if d.fs == "xfs" {
		size = max(size, 320<<20) // mkfs.xfs's minimum
		mkfs = []string{"mkfs.xfs", "-q", "-f"}
	}
	if _, err := os.Stat(d.img(id)); err != nil {
		tmp := d.img(id) + ".tmp"
		if err := os.WriteFile(tmp, nil, 0o600); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := os.Truncate(tmp, size); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if _, err := command.Run(ctx, mkfs[0], append(mkfs[1:], tmp), command.Options{}); err != nil {
			return nil, err
		}
		if err := os.Rename(tmp, d.img(id)); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: size}}, nil
}

func (d *sbDriver) DeleteVolume(_ context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := os.Remove(d.img(r.GetVolumeId())); err != nil && !os.IsNotExist(err) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *sbDriver) LookupVolume(_ context.Context, id string) error {
	if _, err := os.Stat(d.img(id)); err != nil {
		return status.Errorf(codes.NotFound, "volume %s: %v", id, err)
	}
	return nil
}

func knownNode(n string) error {
	if n != "node-a" && n != "node-b" {
		return status.Errorf(codes.NotFound, "no node %q", n)
	}
	return nil
}

func (d *sbDriver) ControllerPublishVolume(ctx context.Context, r *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if err := d.LookupVolume(ctx, r.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := knownNode(r.GetNodeId()); err != nil {
		return nil, err
	}
	return &csi.ControllerPublishVolumeResponse{}, nil
}

func (d *sbDriver) ControllerUnpublishVolume(_ context.Context, r *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if d.lateFence > 0 {
		vol, node := r.GetVolumeId(), r.GetNodeId()
		time.AfterFunc(d.lateFence, func() { _ = d.Fence(context.Background(), vol, node) })
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// Holds: the node has a loop device on the volume that is not cut off.
func (d *sbDriver) Holds(_ context.Context, vol, node string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := vol + "/" + node
	return d.loops[k] != "" && !d.cut[k], nil
}

// Fence shrinks the node's loop device to one sector: the kernel flushes
// what the node's filesystem had dirty (before the fence returns) and
// fails every later write beyond the end of the device.
func (d *sbDriver) Fence(_ context.Context, vol, node string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := vol + "/" + node
	dev := d.loops[k]
	if dev == "" {
		d.cut[k] = true
		return nil
	}
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	info, err := unix.IoctlLoopGetStatus64(fd)
	if err != nil {
		return err
	}
	info.Sizelimit = 512
	if err := unix.IoctlLoopSetStatus64(fd, info); err != nil {
		return err
	}
	d.cut[k] = true
	return nil
}

func (d *sbDriver) Unfence(_ context.Context, vol, node string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.cut, vol+"/"+node)
	return nil
}

// fencing is sbDriver as a csikit.Fencer; plain hides the methods.
type fencing struct{ *sbDriver }

// sbCtrl is the controller part of sbDriver without the Fencer methods.
type sbCtrl interface {
	csikit.Provisioner
	csikit.ControllerPublisher
	csikit.VolumeLookup
}

// sbNode is one node of sbDriver.
type sbNode struct {
	d  *sbDriver
	id string
}

func (n sbNode) NodeStageVolume(ctx context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	vol, staging := r.GetVolumeId(), r.GetStagingTargetPath()
	if mounted(staging) {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	// Node B asks for the whole image as a size limit so that it gets a
	// loop device of its own (AttachLoop reuses one at the same range).
	var opts block.LoopOptions
	if n.id == "node-b" {
		fi, err := os.Stat(n.d.img(vol))
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "volume %s: %v", vol, err)
		}
		opts.SizeLimit = fi.Size()
	}
	dev, err := block.AttachLoop(ctx, n.d.img(vol), opts)
	if err != nil {
		return nil, err
	}
	fs, data := "ext4", ""
	if n.d.fs == "xfs" {
		// Both nodes mount one filesystem, whose UUID XFS would refuse
		// to see twice on one host.
		fs, data = "xfs", "nouuid"
	}
	if err := unix.Mount(dev, staging, fs, 0, data); err != nil {
		_ = block.DetachLoop(ctx, dev)
		return nil, status.Errorf(codes.Internal, "mount %s on %s: %v", dev, staging, err)
	}
	n.d.mu.Lock()
	n.d.loops[vol+"/"+n.id] = dev
	n.d.mu.Unlock()
	return &csi.NodeStageVolumeResponse{}, nil
}

func (n sbNode) NodeUnstageVolume(ctx context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := unix.Unmount(r.GetStagingTargetPath(), 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return nil, status.Errorf(codes.Internal, "unmount %s: %v", r.GetStagingTargetPath(), err)
	}
	k := r.GetVolumeId() + "/" + n.id
	n.d.mu.Lock()
	dev := n.d.loops[k]
	n.d.mu.Unlock()
	if dev != "" {
		if err := block.DetachLoop(ctx, dev); err != nil {
			return nil, err
		}
	}
	n.d.mu.Lock()
	delete(n.d.loops, k)
	n.d.mu.Unlock()
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (n sbNode) NodePublishVolume(_ context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	target := r.GetTargetPath()
	if mounted(target) {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := unix.Mount(r.GetStagingTargetPath(), target, "", unix.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind %s: %v", target, err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (n sbNode) NodeUnpublishVolume(_ context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := unix.Unmount(r.GetTargetPath(), 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return nil, status.Errorf(codes.Internal, "unmount %s: %v", r.GetTargetPath(), err)
	}
	if err := os.Remove(r.GetTargetPath()); err != nil && !os.IsNotExist(err) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// mounted reports whether path is a mount point (its device differs from
// its parent's).
func mounted(path string) bool {
	var a, b unix.Stat_t
	if unix.Stat(path, &a) != nil || unix.Stat(filepath.Dir(path), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

// sbTarget serves the controller with node A in-process (the Run's
// target) and node B on a socket of its own, and returns the config of
// the SplitBrain area for them. mode is "fence" (a csikit.Fencer),
// "none" (no fencing) or "late" (the driver fences a second after it
// answered the unpublish).
func sbTarget(t *testing.T, mode string, trials int) (sanity.Target, sanity.Config, *sbDriver) {
	return sbTargetFS(t, mode, "ext4", trials)
}

// sbTargetFS is sbTarget with volumes of filesystem fs.
func sbTargetFS(t *testing.T, mode, fs string, trials int) (sanity.Target, sanity.Config, *sbDriver) {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { detachLoopsUnder(t, dir) })
	d := newSBDriver(dir)
	d.fs = fs
	if mode == "late" {
		d.lateFence = 1500 * time.Millisecond
	}
	type ctrlNode struct {
		sbCtrl
		sbNode
	}
	type fencingNode struct {
		fencing
		sbNode
	}
	opts := csikit.Options{Name: "splitbrain.sanity.csikit.dev", Version: "v1", NodeID: "node-a", Journal: journal.NewMemory()}
	var driver any = ctrlNode{sbCtrl: d, sbNode: sbNode{d, "node-a"}}
	if mode == "fence" {
		driver = fencingNode{fencing{d}, sbNode{d, "node-a"}}
	}
	srvB := csitest.NewServer(t, sbNode{d, "node-b"}, csikit.Options{Name: opts.Name, Version: "v1", NodeID: "node-b"})
	cfg := sanity.Config{
		Areas: sanity.SplitBrain,
		SplitBrain: &sanity.SplitBrainConfig{
			NodeB:  srvB.Endpoint,
			Trials: trials,
			Settle: time.Second,
			Check: func(ctx context.Context, id string) error {
				return sanity.CheckFilesystem(ctx, d.img(id))
			},
		},
	}
	return sanity.Driver(driver, opts), cfg, d
}

func needSplitBrainTools(t *testing.T) {
	t.Helper()
	needRoot(t)
	testenv.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
	testenv.RequireCommand(t, "e2fsck", "e2fsprogs")
	testenv.RequireCommand(t, "blkid", "util-linux")
	testenv.RequireCommand(t, "dd", "coreutils")
}

// A driver that fences node A at ControllerUnpublishVolume passes the
// split-brain sequence: A's resumed writer gets EIO, B's data and the
// filesystem are intact.
func TestSplitBrainFencingDriverPasses(t *testing.T) {
	needSplitBrainTools(t)
	target, cfg, d := sbTarget(t, "fence", 3)
	sanity.Run(t, target, cfg)
	// Each trial fenced node A (and only A): the pass is the fence's.
	d.mu.Lock()
	defer d.mu.Unlock()
	fencedA := 0
	for k := range d.cut {
		if !strings.HasSuffix(k, "/node-a") {
			t.Errorf("fenced %s, want node A only", k)
		}
		fencedA++
	}
	if fencedA != 3 {
		t.Errorf("node A fenced off %d volumes, want 3 (one per trial)", fencedA)
	}
}

// The harness is the filesystem's to pass too: xfs on the fencing
// driver, checked by xfs_repair -n.
func TestSplitBrainFencingDriverPassesXFS(t *testing.T) {
	needSplitBrainTools(t)
	testenv.RequireCommand(t, "mkfs.xfs", "xfsprogs")
	testenv.RequireCommand(t, "xfs_repair", "xfsprogs")
	target, cfg, d := sbTargetFS(t, "fence", "xfs", 2)
	sanity.Run(t, target, cfg)
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.cut) != 2 {
		t.Errorf("node A fenced off %d volumes, want 2 (one per trial)", len(d.cut))
	}
}

// splitBrainEnv makes TestSplitBrainHelper run the driver that does not
// fence ("none") or fences too late ("late").
const splitBrainEnv = "SANITY_SELFTEST_SPLITBRAIN"

// TestSplitBrainHelper runs the SplitBrain area against the driver that
// does not fence; only TestSplitBrainCatchesLateWrites runs it, in a
// child process, and expects it to fail.
func TestSplitBrainHelper(t *testing.T) {
	if os.Getenv(splitBrainEnv) == "" {
		t.Skip("run by TestSplitBrainCatchesLateWrites in a child process")
	}
	target, cfg, _ := sbTarget(t, os.Getenv(splitBrainEnv), 2)
	sanity.Run(t, target, cfg)
}

// The harness fails a driver that does not fence, and one that fences
// only after it answered the unpublish: node A, resumed after the volume
// moved to node B, writes into the filesystem B has mounted, and every
// trial reports the late writes.
func TestSplitBrainCatchesLateWrites(t *testing.T) {
	needSplitBrainTools(t)
	for _, mode := range []string{"none", "late"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestSplitBrainHelper$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), splitBrainEnv+"="+mode)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err == nil {
				t.Fatalf("the SplitBrain area passed a driver that does not fence in time (%s), want it to fail\n%s", mode, out.String())
			}
			fails := regexp.MustCompile(`--- FAIL: TestSplitBrainHelper/mount/SplitBrain/(trial_\d+)`).FindAllStringSubmatch(out.String(), -1)
			if len(fails) != 2 {
				t.Errorf("got %d failed trials, want both\n%s", len(fails), out.String())
			}
			for _, want := range []string{
				"node A's file changed after ControllerUnpublishVolume(A) returned",
				"records rewritten by node A after it was frozen",
				"rule: Kubernetes non-graceful node shutdown:",
			} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the failure output lacks %q:\n%s", want, out.String())
				}
			}
			if strings.Contains(out.String(), "panic:") {
				t.Errorf("the harness panicked:\n%s", out.String())
			}
			t.Logf("the driver (%s) fails as it must:\n%s", mode, grepLines(out.String(), "SplitBrain", "changed", "filesystem"))
		})
	}
}

// grepLines keeps the lines of s that contain any of words.
func grepLines(s string, words ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
