//go:build linux

package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/csitest/vmtest"
	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/sanity"
)

// kernelVM is the VM of the tests that map images with the kernel: this
// machine's kernel has no rbd or nbd module, so they run on Debian's
// (csitest/vmtest), with udev (`rbd device map` waits for its events)
// and a throwaway cluster that test/cluster.sh starts on the guest's
// loopback, without a mgr (under TCG it takes a third of the guest's CPU,
// and nothing here needs it).
var kernelVM = vmtest.Options{
	Modules:   []string{"rbd", "nbd", "xfs", "ext4", "loop", "fuse", "dm-crypt"},
	Udev:      true,
	MemoryMiB: 4096,
	Setup:     `env=$(CSIKIT_CEPH_MGR=0 test/cluster.sh start "$TMPDIR/ceph") && cat "$env" >>"$VMTEST_ENV"`,
}

// latencyRounds is how many interleaved rounds TestKernelMapperLatency
// times per mapper and kind.
const latencyRounds = 5

// TestKernelMapperLatency measures, side by side in the same guest, the
// stage and publish latency of krbd (production's default), rbd-nbd and
// rbd-fuse (what CI's kernel allows): per kind (ext4, block) and round a
// new volume per mapper (so stage maps and formats, as a first stage on a
// node does), the mappers' order rotating from round to round, so load on
// the host weighs on each alike. The medians are logged as "latency p50"
// lines; no time is asserted.
func TestKernelMapperLatency(t *testing.T) {
	if vmtest.Delegate(t, kernelVM) {
		return
	}
	c := cephtest.Require(t)
	cephtest.RequireRoot(t)
	for _, tool := range []string{"rbd", "rbd-nbd", "rbd-fuse", "mkfs.ext4"} {
		if _, err := exec.LookPath(tool); err != nil {
			cephtest.Skipf(t, "needs %s", tool)
		}
	}
	mappers := []string{driver.MapperKRBD, driver.MapperNBD, driver.MapperFUSE}
	ctx := context.Background()
	for _, kind := range []sanityKind{sanityKinds[0], sanityKinds[2]} {
		servers := map[string]*csitest.Server{}
		for _, m := range mappers {
			s, d := nodeServer(t, c, m, t.TempDir())
			defer func() { _ = s.Close(); _ = d.Close() }()
			servers[m] = s
		}
		stage, publish := map[string][]time.Duration{}, map[string][]time.Duration{}
		for round := 0; round < latencyRounds; round++ {
			for i := range mappers {
				m := mappers[(round+i)%len(mappers)]
				st, pub := stagePublishOnce(t, ctx, c, servers[m], kind, fmt.Sprintf("lat-%s-%s-%d", m, kind.name, round))
				stage[m], publish[m] = append(stage[m], st), append(publish[m], pub)
			}
		}
		for _, m := range mappers {
			t.Logf("latency p50 over %d interleaved rounds: kind=%s mapper=%s stage=%v publish=%v (stage min %v max %v)",
				latencyRounds, kind.name, m, median(stage[m]), median(publish[m]), slices.Min(stage[m]), slices.Max(stage[m]))
		}
	}
}

// median is the middle of ds (rounded to the millisecond).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}

// stagePublishOnce creates a volume of kind on s, times its stage and
// publish, then unpublishes, unstages and deletes it.
func stagePublishOnce(t *testing.T, ctx context.Context, c cephtest.Cluster, s *csitest.Server, kind sanityKind, name string) (stage, publish time.Duration) {
	t.Helper()
	vc := kind.capability()
	created, err := s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{vc},
		Parameters: map[string]string{driver.ParamPool: c.Pool}, Secrets: c.Secrets(), CapacityRange: &csi.CapacityRange{RequiredBytes: kind.size}})
	if err != nil {
		t.Fatal(err)
	}
	vol := created.GetVolume()
	dir := t.TempDir()
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "target")
	began := time.Now()
	if _, err := s.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging,
		VolumeCapability: vc, VolumeContext: vol.GetVolumeContext(), Secrets: c.Secrets()}); err != nil {
		t.Fatalf("stage %s: %v", name, err)
	}
	stage = time.Since(began)
	began = time.Now()
	if _, err := s.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging,
		TargetPath: target, VolumeCapability: vc}); err != nil {
		t.Fatalf("publish %s: %v", name, err)
	}
	publish = time.Since(began)
	if _, err := s.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.GetVolumeId(), TargetPath: target}); err != nil {
		t.Fatalf("unpublish %s: %v", name, err)
	}
	if _, err := s.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging}); err != nil {
		t.Fatalf("unstage %s: %v", name, err)
	}
	if _, err := s.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol.GetVolumeId(), Secrets: c.Secrets()}); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
	return stage, publish
}

// TestKernelMappers runs, in the VM, the node paths of the kernel mappers
// production nodes use (krbd, the default, and rbd-nbd): per volume kind
// (ext4, xfs, block) stage (map, format a blank image, mount), publish,
// unpublish, online expansion (image grown by the controller, the file
// system grown while mounted), a driver restart that finds the mapping,
// unstage (unmount, unmap); a failed stage that leaves nothing mapped;
// sanity's split-brain trials with two node plugins in the guest;
// with krbd, the same for encrypted volumes (encryptedLifecycle); and
// csikit's sanity harness per kind with no case skipped for online growth.
// rbd-fuse runs the lifecycle beside them, for the latency comparison
// (logged as "latency").
func TestKernelMappers(t *testing.T) {
	if vmtest.Delegate(t, kernelVM) {
		return
	}
	c := cephtest.Require(t)
	cephtest.RequireRoot(t)
	for _, tool := range []string{"rbd", "rbd-nbd", "rbd-fuse", "mkfs.ext4", "resize2fs", "mkfs.xfs", "xfs_growfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			cephtest.Skipf(t, "needs %s", tool)
		}
	}
	for _, mapper := range []string{driver.MapperKRBD, driver.MapperNBD, driver.MapperFUSE} {
		t.Run(mapper, func(t *testing.T) {
			for _, kind := range sanityKinds {
				t.Run("lifecycle/"+kind.name, func(t *testing.T) { nodeLifecycle(t, c, mapper, kind) })
			}
			if mapper == driver.MapperFUSE {
				return // its sanity runs on the host (TestSanity)
			}
			t.Run("failed_stage", func(t *testing.T) { failedStage(t, c, mapper) })
			// Two node plugins in the guest, A fenced while frozen
			// (splitBrain); RBD_SPLITBRAIN_TRIALS trials, default 2.
			t.Run("splitbrain", func(t *testing.T) { splitBrain(t, c, mapper, splitBrainTrials(t, 2), tcgOpTimeout) })
			if mapper == driver.MapperKRBD { // the dm-crypt layer is the same on any mapper
				for _, kind := range sanityKinds {
					t.Run("encrypted/"+kind.name, func(t *testing.T) { encryptedLifecycle(t, c, kind) })
				}
			}
			for _, kind := range sanityKinds {
				t.Run("sanity/"+kind.name, func(t *testing.T) { mapperSanity(t, c, mapper, kind) })
			}
		})
	}
}

// tcgOpTimeout bounds each Ceph operation and node tool of the drivers
// in the VM: under TCG on a loaded 2-core host `rbd-nbd list-mapped` (a
// publish's look-up) once took more than the default 30 s. The bound is
// for hung tools, not slow emulation.
const tcgOpTimeout = 3 * time.Minute

// nodeServer serves a driver with mapper on state through csikit.
func nodeServer(t *testing.T, c cephtest.Cluster, mapper, state string) (*csitest.Server, *driver.Driver) {
	t.Helper()
	d, err := driver.New(driver.Options{Monitors: c.Monitors, DefaultPool: c.Pool, NodeID: "vm-node", StateDir: state, Mapper: mapper,
		OpTimeout: tcgOpTimeout})
	if err != nil {
		t.Fatal(err)
	}
	s, err := csitest.Start(d.Service(), d.ServerOptions(csikit.Options{Name: "rbd.csikit.dev", Version: "v0.0.0-vm", NodeID: "vm-node"}))
	if err != nil {
		_ = d.Close()
		t.Fatal(err)
	}
	return s, d
}

// capability is kind's volume capability.
func (k sanityKind) capability() *csi.VolumeCapability {
	vc := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	if k.access == sanity.BlockAccess {
		vc.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		vc.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: k.fsType}}
	}
	return vc
}

// mappings lists what mapper has mapped on this node: krbd's devices in
// sysfs, rbd-nbd's list, rbd-fuse's mounts under state.
func mappings(t *testing.T, mapper, state string) []string {
	t.Helper()
	switch mapper {
	case driver.MapperKRBD:
		ents, _ := os.ReadDir("/sys/bus/rbd/devices")
		var out []string
		for _, e := range ents {
			name, _ := os.ReadFile(filepath.Join("/sys/bus/rbd/devices", e.Name(), "name"))
			out = append(out, "/dev/rbd"+e.Name()+" "+strings.TrimSpace(string(name)))
		}
		return out
	case driver.MapperNBD:
		b, err := exec.Command("rbd-nbd", "list-mapped", "--format", "json").Output()
		if err != nil {
			t.Fatalf("rbd-nbd list-mapped: %v", err)
		}
		var list []struct{ Image, Device string }
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range list {
			out = append(out, e.Device+" "+e.Image)
		}
		return out
	default:
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		var out []string
		for _, l := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], filepath.Join(state, "fuse")+"/") {
				out = append(out, f[4])
			}
		}
		return out
	}
}

// mountSource is the device and file system type mounted at path.
func mountSource(t *testing.T, path string) (dev, fstype string) {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && f[4] == path {
			for i, x := range f {
				if x == "-" && i+2 < len(f) {
					dev, fstype = f[i+2], f[i+1]
				}
			}
		}
	}
	return dev, fstype
}

// wantDevice is the device prefix mapper's mappings have.
var wantDevice = map[string]string{driver.MapperKRBD: "/dev/rbd", driver.MapperNBD: "/dev/nbd", driver.MapperFUSE: "/dev/loop"}

func nodeLifecycle(t *testing.T, c cephtest.Cluster, mapper string, kind sanityKind) {
	ctx := context.Background()
	state := t.TempDir()
	s, d := nodeServer(t, c, mapper, state)
	defer func() { _ = s.Close(); _ = d.Close() }()
	vc := kind.capability()
	params := map[string]string{driver.ParamPool: c.Pool}
	for k, v := range kind.params {
		params[k] = v
	}
	created, err := s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "vm-" + mapper + "-" + kind.name, VolumeCapabilities: []*csi.VolumeCapability{vc}, Parameters: params,
		Secrets: c.Secrets(), CapacityRange: &csi.CapacityRange{RequiredBytes: kind.size},
	})
	if err != nil {
		t.Fatal(err)
	}
	vol := created.GetVolume()
	defer func() { // before the server closes; s is the current one
		if _, err := s.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol.GetVolumeId(), Secrets: c.Secrets()}); err != nil {
			t.Errorf("delete: %v", err)
		}
	}()
	dir := t.TempDir()
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "target")
	stageReq := &csi.NodeStageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging, VolumeCapability: vc,
		VolumeContext: vol.GetVolumeContext(), Secrets: c.Secrets()}
	began := time.Now()
	if _, err := s.Node.NodeStageVolume(ctx, stageReq); err != nil {
		t.Fatalf("stage: %v", err)
	}
	stageTook := time.Since(began)
	if m := mappings(t, mapper, state); len(m) != 1 || !strings.HasPrefix(m[0], wantDevice[mapper]) {
		t.Fatalf("after stage, mappings %q; want one %s device", m, wantDevice[mapper])
	}
	isBlock := kind.access == sanity.BlockAccess
	if !isBlock {
		dev, fstype := mountSource(t, staging)
		want := kind.fsType
		if want == "" {
			want = kind.params[driver.ParamFsType]
		}
		if fstype != want || !strings.HasPrefix(dev, wantDevice[mapper]) {
			t.Fatalf("staging path holds %s from %s; want %s from a %s device", fstype, dev, want, wantDevice[mapper])
		}
		if err := os.WriteFile(filepath.Join(staging, "data"), []byte("kept"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pubReq := &csi.NodePublishVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging, TargetPath: target, VolumeCapability: vc}
	began = time.Now()
	if _, err := s.Node.NodePublishVolume(ctx, pubReq); err != nil {
		t.Fatalf("publish: %v", err)
	}
	publishTook := time.Since(began)
	t.Logf("latency: mapper=%s kind=%s stage=%v publish=%v", mapper, kind.name, stageTook.Round(time.Millisecond), publishTook.Round(time.Millisecond))
	size := func() int64 {
		t.Helper()
		if isBlock {
			n, err := block.DeviceSize(target)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		var st unix.Statfs_t
		if err := unix.Statfs(target, &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Blocks) * st.Bsize
	}
	if !isBlock {
		if b, err := os.ReadFile(filepath.Join(target, "data")); err != nil || string(b) != "kept" {
			t.Fatalf("the published volume reads %q, %v", b, err)
		}
	}

	// Online expansion: the controller grows the image, the node the
	// file system, while it is mounted (and published).
	before := size()
	grown := 2 * kind.size
	if _, err := s.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: vol.GetVolumeId(),
		CapacityRange: &csi.CapacityRange{RequiredBytes: grown}, Secrets: c.Secrets(), VolumeCapability: vc}); err != nil {
		t.Fatalf("controller expand: %v", err)
	}
	ne, err := s.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: vol.GetVolumeId(), VolumePath: target,
		StagingTargetPath: staging, CapacityRange: &csi.CapacityRange{RequiredBytes: grown}, VolumeCapability: vc})
	if err != nil {
		t.Fatalf("node expand while mounted: %v", err)
	}
	after := size()
	if ne.GetCapacityBytes() < grown || after <= before+kind.size/2 {
		t.Fatalf("after expansion to %d: node reports %d, the volume shows %d bytes (was %d)", grown, ne.GetCapacityBytes(), after, before)
	}
	if !isBlock {
		if b, err := os.ReadFile(filepath.Join(target, "data")); err != nil || string(b) != "kept" {
			t.Fatalf("after expansion the volume reads %q, %v", b, err)
		}
	}
	if _, err := s.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.GetVolumeId(), TargetPath: target}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}

	// A restart: a new driver on the same state finds the mapping.
	_ = s.Close()
	_ = d.Close()
	s, d = nodeServer(t, c, mapper, state)
	if _, err := s.Node.NodePublishVolume(ctx, pubReq); err != nil {
		t.Fatalf("publish after a restart: %v", err)
	}
	if !isBlock {
		if b, err := os.ReadFile(filepath.Join(target, "data")); err != nil || string(b) != "kept" {
			t.Fatalf("after a restart the volume reads %q, %v", b, err)
		}
	}
	if _, err := s.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.GetVolumeId(), TargetPath: target}); err != nil {
		t.Fatalf("unpublish after a restart: %v", err)
	}
	if _, err := s.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging}); err != nil {
		t.Fatalf("unstage: %v", err)
	}
	if m := mappings(t, mapper, state); len(m) != 0 {
		t.Fatalf("after unstage, still mapped: %q", m)
	}
	if dev, _ := mountSource(t, staging); dev != "" {
		t.Fatalf("after unstage, %s is still mounted at the staging path", dev)
	}
}

// failedStage: a stage whose mount fails (a mount option the file system
// refuses) leaves nothing mapped or mounted.
func failedStage(t *testing.T, c cephtest.Cluster, mapper string) {
	ctx := context.Background()
	state := t.TempDir()
	s, d := nodeServer(t, c, mapper, state)
	defer func() { _ = s.Close(); _ = d.Close() }()
	vc := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: []string{"csikit_no_such_option"}}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	created, err := s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "vm-failed-" + mapper,
		VolumeCapabilities: []*csi.VolumeCapability{vc}, Parameters: map[string]string{driver.ParamPool: c.Pool},
		Secrets: c.Secrets(), CapacityRange: &csi.CapacityRange{RequiredBytes: 16 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	vol := created.GetVolume()
	defer func() {
		if _, err := s.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol.GetVolumeId(), Secrets: c.Secrets()}); err != nil {
			t.Errorf("delete after a failed stage (a mapping left behind would hold the image): %v", err)
		}
	}()
	staging := filepath.Join(t.TempDir(), "staging")
	_, err = s.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging,
		VolumeCapability: vc, VolumeContext: vol.GetVolumeContext(), Secrets: c.Secrets()})
	if err == nil {
		t.Fatal("a stage with a mount option ext4 refuses succeeded")
	}
	t.Logf("stage failed as it should: %v", err)
	if m := mappings(t, mapper, state); len(m) != 0 {
		t.Errorf("after a failed stage, still mapped: %q", m)
	}
	if dev, _ := mountSource(t, staging); dev != "" {
		t.Errorf("after a failed stage, %s is mounted at the staging path", dev)
	}
}

// mapperSanity runs csikit's harness against the driver with mapper.
func mapperSanity(t *testing.T, c cephtest.Cluster, mapper string, kind sanityKind) {
	state := t.TempDir()
	log := &sanity.LogBuffer{}
	logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := kind.config(t, c, log.Bytes)
	if len(cfg.Skip) != 0 {
		t.Fatalf("in the VM nothing may be skipped: %v", cfg.Skip)
	}
	// The areas where the mapper acts (stage, publish, expansion, data,
	// restart, secrets in logs); the controller's areas do not depend on
	// it and run against the same driver on the host (TestSanity), and
	// under TCG they would cost minutes per kind.
	cfg.Areas = sanity.Identity | sanity.Node | sanity.Expansion | sanity.DataPath | sanity.Restart | sanity.SecretLogs
	// Under TCG on a loaded 2-core host an rbd-nbd stage (map, blkid,
	// mkfs) took 19 s and one hit the default 30 s call bound: the bound
	// is for hung calls, not slow emulation.
	cfg.CallTimeout = 3 * time.Minute
	target := sanity.Restartable(func() (any, csikit.Options, error) {
		d, err := driver.New(driver.Options{
			Monitors: c.Monitors, DefaultPool: c.Pool, NodeID: "sanity-node", StateDir: state,
			Mapper: mapper, MaxCloneDepth: 1, Logger: logger, OpTimeout: tcgOpTimeout,
		})
		if err != nil {
			return nil, csikit.Options{}, err
		}
		return d.Service(), d.ServerOptions(csikit.Options{
			Name: "rbd.csikit.dev", Version: "v0.0.0-sanity", NodeID: "sanity-node", Logger: logger,
		}), nil
	})
	start := time.Now()
	sanity.Run(t, target, cfg)
	t.Logf("sanity against rbd (%s, %s) took %v", mapper, kind.name, time.Since(start))
}
