//go:build linux

package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/mount/mounttest"
	"github.com/csikit/csikit/sanity"
)

// TestSanity runs csikit's harness against the driver, restarted on its
// state directory for the Restart area. Volumes are real tmpfs mounts.
func TestSanity(t *testing.T) {
	csitest.RequireRoot(t, "the driver mounts tmpfs volumes")
	state := t.TempDir()
	log := &sanity.LogBuffer{}
	logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var j interface{ Close() error }
	t.Cleanup(func() {
		if j != nil {
			j.Close()
		}
		// Whatever the harness left mounted below the state directory.
		entries, _ := os.ReadDir(filepath.Join(state, "volumes"))
		for _, e := range entries {
			_ = unix.Unmount(filepath.Join(state, "volumes", e.Name()), unix.MNT_DETACH)
		}
	})
	target := sanity.Restartable(func() (any, csikit.Options, error) {
		if j != nil {
			j.Close()
		}
		d, fj, opts, err := open(state, "sanity-node", 1<<30)
		if err != nil {
			return nil, csikit.Options{}, err
		}
		j = fj
		opts.Logger = logger
		return d, opts, nil
	})
	sanity.Run(t, target, sanity.Config{VolumeSize: 8 << 20, ExpandSize: 16 << 20, Log: log.Bytes})
}

// TestSanityEndpoint runs csikit's harness by endpoint against the tmpfs
// binary, as a CO meets it (its main package, flags and socket), restarting
// the process for the Restart area. Opt-in (CSIKIT_SANITY_ENDPOINT=1, as
// .ci/run sets it): TestSanity covers the same cases in-process.
func TestSanityEndpoint(t *testing.T) {
	if os.Getenv("CSIKIT_SANITY_ENDPOINT") == "" {
		t.Skip("opt-in: set CSIKIT_SANITY_ENDPOINT=1 (root; .ci/run does)")
	}
	csitest.RequireRoot(t, "the driver mounts tmpfs volumes")
	bin := csitest.Build(t, ".")
	state := t.TempDir()
	t.Cleanup(func() {
		entries, _ := os.ReadDir(filepath.Join(state, "volumes"))
		for _, e := range entries {
			_ = unix.Unmount(filepath.Join(state, "volumes", e.Name()), unix.MNT_DETACH)
		}
	})
	p := csitest.StartProcess(t, bin, "--nodeid", "sanity-node", "--state-dir", state, "--log-level", "debug")
	start := time.Now()
	sanity.Run(t, sanity.Endpoint(p.Endpoint), sanity.Config{
		VolumeSize: 8 << 20, ExpandSize: 16 << 20, Restart: p.Restart, Log: p.Log,
	})
	t.Logf("sanity by endpoint against tmpfs took %v", time.Since(start))
}

// TestUnitWithoutRoot exercises the RPCs through csikit's chain with the
// recording mounter: no root, no mounts.
func TestUnitWithoutRoot(t *testing.T) {
	d, j, opts, err := open(t.TempDir(), "node-1", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	var rec mounttest.Recorder
	d.m = &rec
	s := csitest.NewServer(t, d, opts)
	ctx := context.Background()
	mountCap := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	// An ID the journal does not hold never becomes a path.
	_, err = s.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: "../../etc", TargetPath: "/pods/p/v", VolumeCapability: mountCap,
	})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("publish of an unknown ID: %v, want NotFound", err)
	}
	if len(rec.Calls()) != 0 {
		t.Fatalf("the mounter was called: %+v", rec.Calls())
	}
	_, err = s.Controller.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{
		VolumeId: "missing", VolumeCapabilities: []*csi.VolumeCapability{mountCap},
	})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("ValidateVolumeCapabilities of a missing volume: %v, want NotFound", err)
	}
	// Deleting what never existed succeeds, as the spec asks.
	if _, err := s.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "never-made"}); err != nil {
		t.Fatalf("DeleteVolume of an unknown ID: %v", err)
	}
	// A capacity range no page-granular size fits.
	_, err = s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1, LimitBytes: 2},
	})
	if status.Code(err) != codes.OutOfRange {
		t.Fatalf("CreateVolume of 1-2 bytes: %v, want OutOfRange", err)
	}
	// A filesystem this driver does not have is refused, not handed out
	// as tmpfs.
	_, err = s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-xfs", VolumeCapabilities: []*csi.VolumeCapability{withFSType(mountCap, "xfs")},
	})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("CreateVolume with fs_type xfs: %v, want InvalidArgument", err)
	}
}

// withFSType returns a copy of a mount capability with fs_type fs.
func withFSType(c *csi.VolumeCapability, fs string) *csi.VolumeCapability {
	c = proto.Clone(c).(*csi.VolumeCapability)
	c.GetMount().FsType = fs
	return c
}

// TestSizeIsEnforced writes past a 1 MiB volume through its published
// path: the tmpfs limit answers ENOSPC, and expansion raises it.
func TestSizeIsEnforced(t *testing.T) {
	csitest.RequireRoot(t, "the driver mounts tmpfs volumes")
	state := t.TempDir()
	d, j, opts, err := open(state, "node-1", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	s := csitest.NewServer(t, d, opts)
	ctx := context.Background()
	mountCap := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	vol, err := s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "small", VolumeCapabilities: []*csi.VolumeCapability{mountCap},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	t.Cleanup(func() { s.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}) })
	target := filepath.Join(t.TempDir(), "pod")
	for _, fs := range []string{"xfs", "ext4"} {
		_, err := s.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: withFSType(mountCap, fs)})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("NodePublishVolume with fs_type %s: %v, want InvalidArgument", fs, err)
		}
	}
	if _, err := s.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, TargetPath: target, VolumeCapability: withFSType(mountCap, "tmpfs")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
	})
	write := func(n int) error {
		return os.WriteFile(filepath.Join(target, "data"), make([]byte, n), 0o600)
	}
	if err := write(2 << 20); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("writing 2 MiB into a 1 MiB volume: %v, want ENOSPC", err)
	}
	stats, err := s.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
	if err != nil || stats.GetUsage()[0].GetTotal() != 1<<20 {
		t.Fatalf("stats: %v, %v, want a 1 MiB total", stats, err)
	}
	if _, err := s.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20},
	}); err != nil {
		t.Fatal(err)
	}
	if err := write(2 << 20); err != nil {
		t.Fatalf("writing 2 MiB after expanding to 4 MiB: %v", err)
	}
}
