package mounttest_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/mount/mounttest"
)

func TestRecorderRules(t *testing.T) {
	var r mounttest.Recorder
	ctx := context.Background()
	stage := mount.StageOptions{Device: "/dev/loop7", Target: "/staging/v1", FSType: "xfs", MountFlags: []string{"noatime"}}
	for _, tc := range []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"publish before stage", func() error {
			return r.Publish(ctx, mount.PublishOptions{Source: "/staging/v1", Target: "/pod/v1"})
		}, codes.FailedPrecondition},
		{"stage", func() error { return r.Stage(ctx, stage) }, codes.OK},
		{"stage repeated", func() error { return r.Stage(ctx, stage) }, codes.OK},
		{"stage other flags", func() error {
			o := stage
			o.MountFlags = []string{"sync"}
			return r.Stage(ctx, o)
		}, codes.AlreadyExists},
		{"stage other device", func() error {
			o := stage
			o.Device = "/dev/loop8"
			return r.Stage(ctx, o)
		}, codes.AlreadyExists},
		{"publish with a flag a bind cannot take", func() error {
			return r.Publish(ctx, mount.PublishOptions{Source: "/staging/v1", Target: "/pod/v1", MountFlags: []string{"sync"}})
		}, codes.InvalidArgument},
		{"publish", func() error {
			return r.Publish(ctx, mount.PublishOptions{Source: "/staging/v1", Target: "/pod/v1"})
		}, codes.OK},
		{"publish read-only onto the same target", func() error {
			return r.Publish(ctx, mount.PublishOptions{Source: "/staging/v1", Target: "/pod/v1", ReadOnly: true})
		}, codes.AlreadyExists},
		{"resize", func() error {
			_, err := r.Resize(ctx, mount.ResizeOptions{Device: "/dev/loop7", Path: "/staging/v1"})
			return err
		}, codes.OK},
		{"resize nothing", func() error { _, err := r.Resize(ctx, mount.ResizeOptions{Path: "/elsewhere"}); return err }, codes.NotFound},
		{"unpublish", func() error { return r.Unpublish(ctx, "/pod/v1", mount.UnmountOptions{}) }, codes.OK},
		{"unpublish again", func() error { return r.Unpublish(ctx, "/pod/v1", mount.UnmountOptions{}) }, codes.OK},
		{"unstage", func() error { return r.Unstage(ctx, "/staging/v1", mount.UnmountOptions{}) }, codes.OK},
	} {
		if got := status.Code(tc.call()); got != tc.want {
			t.Fatalf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if s, p := r.Mounts(); s != 0 || p != 0 {
		t.Fatalf("left %d staged, %d published", s, p)
	}
	calls := r.Calls()
	if len(calls) != 13 || calls[1].Op != mounttest.OpStage || calls[1].Stage.Device != "/dev/loop7" {
		t.Fatalf("calls: %+v", calls)
	}
}

func TestRecorderFail(t *testing.T) {
	boom := status.Error(codes.Internal, "mkfs failed")
	r := mounttest.Recorder{Fail: func(c mounttest.Call) error {
		if c.Op == mounttest.OpStage {
			return boom
		}
		return nil
	}}
	err := r.Stage(context.Background(), mount.StageOptions{Device: "/dev/x", Target: "/s"})
	if !errors.Is(err, boom) {
		t.Fatalf("Stage: %v", err)
	}
	if _, ok := r.Staged("/s"); ok {
		t.Fatal("a failed stage was recorded as staged")
	}
	if c := r.Calls(); len(c) != 1 || c[0].Err == nil {
		t.Fatalf("calls: %+v", c)
	}
	r.AddSource("/data/v1")
	if err := r.Publish(context.Background(), mount.PublishOptions{Source: "/data/v1", Target: "/pod"}); err != nil {
		t.Fatalf("publish from a declared source: %v", err)
	}
}
