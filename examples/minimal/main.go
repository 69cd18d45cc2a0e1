// Command minimal is the README's quickstart: a node plugin that publishes a directory per volume.
package main

import (
	"context"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit"
	"github.com/csikit/csikit/mount"
	"os"
	"os/signal"
	"path/filepath"
)

type driver struct{ m *mount.Mounter }

func (d driver) NodePublishVolume(ctx context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	src := filepath.Join(os.TempDir(), "minimal-csi", filepath.Base(r.VolumeId)) // never trust an ID as a path
	if err := os.MkdirAll(src, 0o750); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, d.m.Publish(ctx, mount.PublishOptions{Source: src, Target: r.TargetPath, ReadOnly: r.Readonly, AllowUnmountedSource: true})
}

func (d driver) NodeUnpublishVolume(ctx context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	return &csi.NodeUnpublishVolumeResponse{}, d.m.Unpublish(ctx, r.TargetPath, mount.UnmountOptions{})
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	host, _ := os.Hostname()
	srv, err := csikit.NewServer(driver{mount.New(mount.Options{})}, csikit.Options{Name: "minimal.csikit.dev", Version: "v0.1.0", NodeID: host})
	if err == nil {
		err = srv.ListenAndServe(ctx, "unix:///tmp/minimal-csi.sock") // serves until Ctrl-C, then drains
	}
	if err != nil {
		panic(err)
	}
}
