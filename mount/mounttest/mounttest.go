// Package mounttest provides a recording, in-memory mount.Interface for
// unit tests of a driver's node RPCs that cannot mount (no root, CI
// without privileges, a laptop).
//
// The Recorder keeps the same rules the real Mounter applies to repeated
// and conflicting calls — a repeat with the same options succeeds, other
// options on an occupied target answer AlreadyExists, publishing from a
// source that was never staged answers FailedPrecondition — so a driver
// that mishandles retries fails against it the same way; Publish refuses
// the mount flags a bind mount cannot apply, as the real one does
// (mount.CheckBindFlags). It does not
// replace tests on real mounts: it knows nothing of devices, file systems
// or the kernel.
package mounttest

import (
	"context"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/mount"
)

// Op names a mount.Interface method.
type Op string

// The recorded operations.
const (
	OpStage     Op = "Stage"
	OpUnstage   Op = "Unstage"
	OpPublish   Op = "Publish"
	OpUnpublish Op = "Unpublish"
	OpResize    Op = "Resize"
)

// Call is one recorded call.
type Call struct {
	// Op is the method called.
	Op Op
	// Target is the path the call acted on (the staging path, the publish
	// target, or the resized mount's path).
	Target string
	// Stage holds Stage's options; nil for other ops.
	Stage *mount.StageOptions
	// Publish holds Publish's options; nil for other ops.
	Publish *mount.PublishOptions
	// Unmount holds Unstage's and Unpublish's options.
	Unmount mount.UnmountOptions
	// Err is what the call returned.
	Err error
}

// Recorder is an in-memory mount.Interface. The zero value is ready; it is
// safe for concurrent use.
type Recorder struct {
	// Fail, when set, is asked before each call is applied; a non-nil
	// error is returned (and recorded) instead, and nothing changes. Use
	// it to inject a failed format or a busy unmount.
	Fail func(c Call) error

	mu        sync.Mutex
	calls     []Call
	staged    map[string]mount.StageOptions
	published map[string]mount.PublishOptions
	sources   map[string]bool
}

var _ mount.Interface = (*Recorder)(nil)

// AddSource declares path a valid Publish source without staging it (a
// directory the driver itself keeps mounted, say).
func (r *Recorder) AddSource(path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sources == nil {
		r.sources = map[string]bool{}
	}
	r.sources[path] = true
}

// Calls returns the calls made so far, in order.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Staged returns the options of the stage in place at target.
func (r *Recorder) Staged(target string) (mount.StageOptions, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.staged[target]
	return o, ok
}

// Published returns the options of the publish in place at target.
func (r *Recorder) Published(target string) (mount.PublishOptions, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.published[target]
	return o, ok
}

// Mounts returns how many stages and publishes are in place: both zero
// after a driver cleaned up everything it mounted.
func (r *Recorder) Mounts() (staged, published int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.staged), len(r.published)
}

// do records c after applying it with apply, unless Fail refuses it.
func (r *Recorder) do(c Call, apply func() error) error {
	if r.Fail != nil {
		if err := r.Fail(c); err != nil {
			c.Err = err
			r.mu.Lock()
			r.calls = append(r.calls, c)
			r.mu.Unlock()
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.staged == nil {
		r.staged, r.published = map[string]mount.StageOptions{}, map[string]mount.PublishOptions{}
	}
	c.Err = apply()
	r.calls = append(r.calls, c)
	return c.Err
}

// Stage records a stage at o.Target: a repeat with the same device, type,
// flags and read-only setting succeeds, anything else there is
// AlreadyExists.
func (r *Recorder) Stage(ctx context.Context, o mount.StageOptions) error {
	if o.FSType == "" {
		o.FSType = "ext4"
	}
	return r.do(Call{Op: OpStage, Target: o.Target, Stage: &o}, func() error {
		if err := ctx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		if o.Target == "" || o.Device == "" {
			return status.Error(codes.InvalidArgument, "mounttest: Stage needs Device and Target")
		}
		if have, ok := r.staged[o.Target]; ok {
			if have.Device == o.Device && have.FSType == o.FSType && have.ReadOnly == o.ReadOnly &&
				slices.Equal(have.MountFlags, o.MountFlags) {
				return nil
			}
			return status.Errorf(codes.AlreadyExists, "mounttest: %s is staged with other options (device %s, type %s)", o.Target, have.Device, have.FSType)
		}
		r.staged[o.Target] = o
		return nil
	})
}

// Unstage removes the stage at target; nothing staged there is success.
func (r *Recorder) Unstage(ctx context.Context, target string, opts mount.UnmountOptions) error {
	return r.do(Call{Op: OpUnstage, Target: target, Unmount: opts}, func() error {
		delete(r.staged, target)
		return nil
	})
}

// Publish records a publish at o.Target from o.Source, refusing MountFlags a
// bind mount cannot apply as the real Publish does (mount.CheckBindFlags:
// InvalidArgument). The source must be staged,
// declared with AddSource, or allowed by o.AllowUnmountedSource (else
// FailedPrecondition, as the real Publish refuses a source that is not a
// mount point); a repeat with the
// same source, flags and read-only setting succeeds, anything else there is
// AlreadyExists.
func (r *Recorder) Publish(ctx context.Context, o mount.PublishOptions) error {
	return r.do(Call{Op: OpPublish, Target: o.Target, Publish: &o}, func() error {
		if err := ctx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		if o.Target == "" || o.Source == "" {
			return status.Error(codes.InvalidArgument, "mounttest: Publish needs Source and Target")
		}
		if err := mount.CheckBindFlags(o.MountFlags); err != nil {
			return err
		}
		if _, ok := r.staged[o.Source]; !ok && !r.sources[o.Source] && !o.AllowUnmountedSource {
			return status.Errorf(codes.FailedPrecondition, "mounttest: source %s is not staged", o.Source)
		}
		if have, ok := r.published[o.Target]; ok {
			if have.Source == o.Source && have.ReadOnly == o.ReadOnly && slices.Equal(have.MountFlags, o.MountFlags) {
				return nil
			}
			return status.Errorf(codes.AlreadyExists, "mounttest: %s is published from %s with other options", o.Target, have.Source)
		}
		r.published[o.Target] = o
		return nil
	})
}

// Unpublish removes the publish at target; nothing there is success.
func (r *Recorder) Unpublish(ctx context.Context, target string, opts mount.UnmountOptions) error {
	return r.do(Call{Op: OpUnpublish, Target: target, Unmount: opts}, func() error {
		delete(r.published, target)
		return nil
	})
}

// Resize reports a resize of the volume at o.Path, which must be staged or
// published (else NotFound).
func (r *Recorder) Resize(ctx context.Context, o mount.ResizeOptions) (bool, error) {
	err := r.do(Call{Op: OpResize, Target: o.Path}, func() error {
		_, s := r.staged[o.Path]
		_, p := r.published[o.Path]
		if !s && !p {
			return status.Errorf(codes.NotFound, "mounttest: nothing mounted at %s", o.Path)
		}
		return nil
	})
	return err == nil, err
}
