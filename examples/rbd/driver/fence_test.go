//go:build linux

package driver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
)

// accessRecord reads volume vol's access object (driver.AccessNamespace)
// with the test user.
func accessRecord(t *testing.T, c cephtest.Cluster, vol string) map[string]string {
	t.Helper()
	pool := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	defer pool.Close()
	io, done, err := pool.IOContext(context.Background(), driver.Credentials{User: c.User, Key: c.Key}, c.Pool, driver.AccessNamespace)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	m, err := io.GetAllOmapValues("csi-vol-"+vol[strings.IndexByte(vol, '-')+1:], "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

// blocklisted lists the cluster's blocklist entries (admin).
func blocklisted(t *testing.T, c cephtest.Cluster) string {
	t.Helper()
	out, err := exec.Command("ceph", "-c", c.Conf, "-n", "client.admin", "-k", c.AdminKeyring, "osd", "blocklist", "ls").CombinedOutput()
	if err != nil {
		t.Fatalf("osd blocklist ls: %v: %s", err, out)
	}
	return string(out)
}

// stageOn stages block volume vol on node d and returns the device.
func stageOn(ctx context.Context, d *driver.Driver, c cephtest.Cluster, vol, staging string) (string, error) {
	if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: staging, VolumeCapability: blockCap, Secrets: c.Secrets()}); err != nil {
		return "", err
	}
	target := staging + ".dev"
	if _, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol, StagingTargetPath: staging, TargetPath: target, VolumeCapability: blockCap}); err != nil {
		return "", err
	}
	return target, nil
}

// writeSync writes b at off of dev and fsyncs it.
func writeSync(dev string, b []byte, off int64) error {
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteAt(b, off)
	serr := f.Sync()
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	if serr != nil {
		return serr
	}
	return cerr
}

// TestFenceRBDFuse is the fencing lifecycle on real mappings: two node
// plugins on this host (node IDs node-a and node-b, state directories of
// their own, each its own rbd-fuse and so its own Ceph client) and a
// controller. A stages; B's stage is refused naming A; the controller's
// unpublish and Fence (what csikit runs at ControllerUnpublishVolume)
// blocklist A's client, after which A's writes fail and B stages and
// writes; a restarted controller still knows the fence; Unfence lifts it;
// A's late unstage cleans up without touching B's data.
func TestFenceRBDFuse(t *testing.T) {
	c := cephtest.Require(t)
	cephtest.RequireRoot(t)
	if _, err := exec.LookPath("rbd-fuse"); err != nil {
		cephtest.Skipf(t, "needs rbd-fuse")
	}
	ctx := context.Background()
	ctl := newDriver(t, c, driver.Options{})
	a := newDriver(t, c, driver.Options{NodeID: "node-a", Mapper: driver.MapperFUSE})
	b := newDriver(t, c, driver.Options{NodeID: "node-b", Mapper: driver.MapperFUSE})
	vol := blockVolume(t, ctl, c, nil)
	// Registered first, so it runs last: after both nodes' unstages.
	t.Cleanup(func() {
		if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol, Secrets: c.Secrets()}); err != nil {
			t.Errorf("DeleteVolume at the end: %v", err)
		}
	})
	pub := func(d *driver.Driver, node string) error {
		_, err := d.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: vol, NodeId: node, VolumeCapability: blockCap, Secrets: c.Secrets()})
		return err
	}
	unpub := func(d *driver.Driver, node string) error {
		_, err := d.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: node, Secrets: c.Secrets()})
		return err
	}
	holds := func(d *driver.Driver, node string) bool {
		t.Helper()
		h, err := d.Holds(ctx, vol, node)
		if err != nil {
			t.Fatalf("Holds(%s): %v", node, err)
		}
		return h
	}
	dir := t.TempDir()
	stA, stB := filepath.Join(dir, "a"), filepath.Join(dir, "b")

	if err := pub(ctl, "node-a"); err != nil {
		t.Fatal(err)
	}
	if err := pub(ctl, "node-b"); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "node-a") {
		t.Fatalf("publish to node-b while published to node-a = %v, want FailedPrecondition naming node-a", err)
	}
	devA, err := stageOn(ctx, a, c, vol, stA)
	if err != nil {
		t.Fatal(err)
	}
	// The loop device under A's published block device, by its number.
	var stA0 unix.Stat_t
	if err := unix.Stat(devA, &stA0); err != nil {
		t.Fatal(err)
	}
	loopA, err := filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(stA0.Rdev), unix.Minor(stA0.Rdev)))
	if err != nil || !strings.HasPrefix(filepath.Base(loopA), "loop") {
		t.Fatalf("A's device %s: want a loop device, got %q (%v)", devA, loopA, err)
	}
	aDone := false
	t.Cleanup(func() {
		if !aDone {
			_, _ = a.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: stA + ".dev"})
			_, _ = a.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: stA})
		}
	})
	stampA := bytes.Repeat([]byte("A"), 4096)
	if err := writeSync(devA, stampA, 0); err != nil {
		t.Fatalf("A's write before the fence: %v", err)
	}
	rec := accessRecord(t, c, vol)
	var staged struct{ Addrs []string }
	if err := json.Unmarshal([]byte(rec["stage/node-a"]), &staged); err != nil || len(staged.Addrs) == 0 {
		t.Fatalf("access record %v: want node-a's stage with its client address (%v)", rec, err)
	}
	addrA := staged.Addrs[0]
	t.Logf("node-a's rbd-fuse client: %s", addrA)
	if !holds(ctl, "node-a") || holds(ctl, "node-b") {
		t.Fatal("Holds: want node-a true, node-b false")
	}

	// B's stage while A holds the volume: refused, naming A and its client.
	if _, err := stageOn(ctx, b, c, vol, stB); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "node-a") || !strings.Contains(err.Error(), addrA) {
		t.Fatalf("B's stage while A holds the volume = %v, want FailedPrecondition naming node-a and %s", err, addrA)
	}

	// What csikit does at ControllerUnpublishVolume(A).
	if err := unpub(ctl, "node-a"); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Fence(ctx, vol, "node-a"); err != nil {
		t.Fatalf("Fence: %v", err)
	}
	if err := ctl.Fence(ctx, vol, "node-a"); err != nil {
		t.Fatalf("Fence again (idempotent): %v", err)
	}
	if holds(ctl, "node-a") {
		t.Fatal("Holds(node-a) after Fence = true")
	}
	if bl := blocklisted(t, c); !strings.Contains(bl, addrA) {
		t.Fatalf("blocklist after Fence lacks %s:\n%s", addrA, bl)
	}
	if err := writeSync(devA, bytes.Repeat([]byte("a"), 4096), 4096); err == nil {
		t.Fatal("A's write after the fence succeeded")
	} else {
		t.Logf("A's write after the fence: %v", err)
	}

	if err := pub(ctl, "node-b"); err != nil {
		t.Fatal(err)
	}
	devB, err := stageOn(ctx, b, c, vol, stB)
	if err != nil {
		t.Fatalf("B's stage after A's fence: %v", err)
	}
	t.Cleanup(func() {
		_, _ = b.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: stB + ".dev"})
		if _, err := b.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: stB}); err != nil {
			t.Errorf("B's unstage: %v", err)
		}
	})
	stampB := bytes.Repeat([]byte("B"), 4096)
	if err := writeSync(devB, stampB, 4096); err != nil {
		t.Fatalf("B's write: %v", err)
	}

	// A's late unstage: cleans up its own mapping, leaves B's record.
	// What CI met on the way: B's stage, searching for its own loop
	// device, asked the kernel about A's (same image name, other rbd-fuse
	// mount); that call stats A's backing file and sat on A's fenced,
	// unanswering rbd-fuse, holding A's loop device open, until A's
	// unstage killed the daemon, and the unstage's detach ran before the
	// call's goroutine had closed the device. Here: A's daemon stopped
	// (it answers nothing, as when fenced), a goroutine in the kernel's
	// loop status call on A's device, closing it a moment after the
	// daemon's death lets the call return. The unstage waits for it.
	_, _ = a.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: stA + ".dev"})
	backing, err := os.ReadFile(filepath.Join(loopA, "loop", "backing_file"))
	if err != nil {
		t.Fatal(err)
	}
	pidText, err := os.ReadFile(filepath.Dir(strings.TrimSpace(string(backing))) + ".pid")
	if err != nil {
		t.Fatal(err)
	}
	fusePID, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(fusePID, unix.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Kill(fusePID, unix.SIGCONT) }) // the unstage kills it
	time.Sleep(1500 * time.Millisecond)                        // past FUSE's attribute cache (1 s)
	holderFD, err := unix.Open("/dev/"+filepath.Base(loopA), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		_, err := unix.IoctlLoopGetStatus64(holderFD) // blocks on the stopped daemon
		time.Sleep(200 * time.Millisecond)
		unix.Close(holderFD)
		held <- err
	}()
	t.Cleanup(func() { t.Logf("the holder's status call: %v", <-held) })
	if _, err := a.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: stA}); err != nil {
		t.Fatalf("A's unstage after the fence: %v", err)
	}
	aDone = true
	// Its loop device on the dead rbd-fuse file is gone too, not left
	// attached until the node reboots.
	if b, err := os.ReadFile(filepath.Join(loopA, "loop", "backing_file")); err == nil {
		t.Errorf("A's loop device %s is still attached to %q after A's unstage", filepath.Base(loopA), strings.TrimSpace(string(b)))
	}
	if _, ok := accessRecord(t, c, vol)["stage/node-b"]; !ok {
		t.Fatal("A's unstage removed B's stage record")
	}

	// A restarted controller: the fence is in the volume's access object.
	ctl2 := newDriver(t, c, driver.Options{})
	if err := unpub(ctl2, "node-a"); err != nil { // what brings it the secrets
		t.Fatal(err)
	}
	if holds(ctl2, "node-a") {
		t.Fatal("restarted controller: Holds(node-a) = true, want the fence remembered")
	}
	if !holds(ctl2, "node-b") {
		t.Fatal("restarted controller: Holds(node-b) = false")
	}
	if err := ctl2.Unfence(ctx, vol, "node-a"); err != nil {
		t.Fatalf("Unfence: %v", err)
	}
	if err := ctl2.Unfence(ctx, vol, "node-a"); err != nil {
		t.Fatalf("Unfence again (idempotent): %v", err)
	}
	if bl := blocklisted(t, c); strings.Contains(bl, addrA) {
		t.Fatalf("blocklist after Unfence still has %s:\n%s", addrA, bl)
	}
	if _, ok := accessRecord(t, c, vol)["fence/node-a"]; ok {
		t.Fatal("fence record left after Unfence")
	}
	got := make([]byte, 8192)
	f, err := os.Open(devB)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(got, 0)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:4096], stampA) || !bytes.Equal(got[4096:], stampB) {
		t.Fatalf("B reads %q…/%q…, want A's fenced-before stamp then B's", got[:8], got[4096:4104])
	}
}
