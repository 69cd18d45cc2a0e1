package mount

import "context"

// Interface is what a driver's node RPCs need of a Mounter: the four
// lifecycle operations and online expansion. Depend on it rather than on
// *Mounter so node RPCs can be unit tested without root against the
// recording fake in mount/mounttest; *Mounter implements it.
type Interface interface {
	// Stage mounts a file system at a staging path (see Mounter.Stage).
	Stage(ctx context.Context, o StageOptions) error
	// Unstage unmounts a staging path (see Mounter.Unstage).
	Unstage(ctx context.Context, target string, opts UnmountOptions) error
	// Publish bind-mounts a staged volume at a target (see Mounter.Publish).
	Publish(ctx context.Context, o PublishOptions) error
	// Unpublish unmounts and removes a target (see Mounter.Unpublish).
	Unpublish(ctx context.Context, target string, opts UnmountOptions) error
	// Resize grows a mounted file system to its device (see Mounter.Resize).
	Resize(ctx context.Context, o ResizeOptions) (bool, error)
}

var _ Interface = (*Mounter)(nil)
