package csikit_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/metadata"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csi/logging"
	"github.com/csikit/csikit/csi/requestid"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/mount"
)

// loggingDriver stages a tmpfs and bind-publishes it with the mount
// helpers, ignores the reserved ID on CreateVolume (so idempotency warns),
// and logs a line of its own in every call through logging.FromContext.
type loggingDriver struct {
	shared *mount.Mounter // no Logger: logs through the call's logger
	own    *mount.Mounter // its own Logger
}

func (d *loggingDriver) LookupVolume(context.Context, string) error { return nil }

func (d *loggingDriver) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	logging.FromContext(ctx).Info("driver: creating", "name", r.GetName())
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "not-the-reserved-id"}}, nil
}

func (d *loggingDriver) DeleteVolume(ctx context.Context, _ *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	logging.FromContext(ctx).Info("driver: deleting")
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *loggingDriver) NodeStageVolume(ctx context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	logging.FromContext(ctx).Info("driver: staging")
	return &csi.NodeStageVolumeResponse{}, d.shared.Stage(ctx, mount.StageOptions{Device: "tmpfs", FSType: "tmpfs", Target: r.GetStagingTargetPath(), MountFlags: []string{"size=1m"}})
}

func (d *loggingDriver) NodeUnstageVolume(ctx context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	logging.FromContext(ctx).Info("driver: unstaging")
	return &csi.NodeUnstageVolumeResponse{}, d.shared.Unstage(ctx, r.GetStagingTargetPath(), mount.UnmountOptions{})
}

func (d *loggingDriver) NodePublishVolume(ctx context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	logging.FromContext(ctx).Info("driver: publishing")
	return &csi.NodePublishVolumeResponse{}, d.own.Publish(ctx, mount.PublishOptions{Source: r.GetStagingTargetPath(), Target: r.GetTargetPath()})
}

func (d *loggingDriver) NodeUnpublishVolume(ctx context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	logging.FromContext(ctx).Info("driver: unpublishing")
	return &csi.NodeUnpublishVolumeResponse{}, d.own.Unpublish(ctx, r.GetTargetPath(), mount.UnmountOptions{})
}

// Every line the SDK and the driver write during a call carries that
// call's request ID: the server's interceptor lines, the idempotency
// interceptor's warning, the mount helpers' lines (with and without a
// Logger of their own) and the driver's FromContext lines.
func TestEveryLineCarriesTheRequestID(t *testing.T) {
	testenv.RequireRoot(t, "mounts a tmpfs and bind-mounts it")
	var serverLog, mountLog testenv.SyncBuffer
	debug := &slog.HandlerOptions{Level: slog.LevelDebug}
	d := &loggingDriver{
		shared: mount.New(mount.Options{}),
		own:    mount.New(mount.Options{Logger: slog.New(slog.NewJSONHandler(&mountLog, debug))}),
	}
	s := serve(t, d, csikit.Options{NodeID: "node-1", Journal: journal.NewMemory(),
		Logger: slog.New(slog.NewJSONHandler(&serverLog, debug))})

	dir := t.TempDir()
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "target")
	t.Cleanup(func() { // before TempDir's removal, even if the test failed
		unix.Unmount(target, unix.MNT_DETACH)
		unix.Unmount(staging, unix.MNT_DETACH)
	})
	mountCap := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	with := func(id string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), requestid.MetadataKey, id)
	}
	calls := []struct {
		id   string
		call func(ctx context.Context) error
	}{
		{"rid-create", func(ctx context.Context) error {
			_, err := s.controller().CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap}})
			return err
		}},
		{"rid-stage", func(ctx context.Context) error {
			_, err := s.node().NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, VolumeCapability: mountCap})
			return err
		}},
		{"rid-publish", func(ctx context.Context) error {
			_, err := s.node().NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap})
			return err
		}},
		{"rid-unpublish", func(ctx context.Context) error {
			_, err := s.node().NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: target})
			return err
		}},
		{"rid-unstage", func(ctx context.Context) error {
			_, err := s.node().NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging})
			return err
		}},
	}
	for _, c := range calls {
		if err := c.call(with(c.id)); err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
	}

	// msg → the call it must belong to, for the lines of each source.
	want := map[string]string{
		"driver: creating": "rid-create", "driver ignored the reserved ID; retries after a crash may create duplicates": "rid-create",
		"driver: staging": "rid-stage", "driver: publishing": "rid-publish",
		"driver: unpublishing": "rid-unpublish", "driver: unstaging": "rid-unstage",
	}
	seen := map[string]bool{}
	check := func(name, out string) {
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%s log: %v: %s", name, err, l)
			}
			id, _ := m[requestid.LogKey].(string)
			msg, _ := m["msg"].(string)
			if strings.HasPrefix(msg, "CSI driver ") {
				continue // the server's own lifecycle, outside any call
			}
			if !strings.HasPrefix(id, "rid-") {
				t.Errorf("%s log line without the call's request ID: %s", name, l)
			}
			if w, ok := want[msg]; ok && id != w {
				t.Errorf("%s log: %q has request ID %q, want %q", name, msg, id, w)
			}
			if m[logging.KeyMethod] == nil {
				t.Errorf("%s log line without the method: %s", name, l)
			}
			seen[name+": "+msg+" @"+id] = true
		}
	}
	check("server", serverLog.String())
	check("mount", mountLog.String())
	// The helpers did log, each to where it should.
	for _, must := range []string{
		"server: staged @rid-stage",       // mount.Mounter without a Logger → the call's logger
		"server: unmounted @rid-unstage",  //
		"mount: published @rid-publish",   // mount.Mounter with its own Logger
		"mount: unmounted @rid-unpublish", //
		"server: driver ignored the reserved ID; retries after a crash may create duplicates @rid-create", // idempotency
		"server: driver: publishing @rid-publish",                                                         // the driver's FromContext
	} {
		if !seen[must] {
			t.Errorf("no line %q; server log:\n%s\nmount log:\n%s", must, serverLog.String(), mountLog.String())
		}
	}
}
