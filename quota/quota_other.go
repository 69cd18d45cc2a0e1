//go:build !linux

package quota

import (
	"context"

	"google.golang.org/grpc/codes"
)

// Check reports whether path's filesystem enforces project quotas: nil
// when it does. Other systems have none: it returns Unimplemented.
func Check(ctx context.Context, path string) error {
	return errorf(codes.Unimplemented, ErrUnsupported, "project quotas are Linux-only")
}

// SetProject gives the directory or file at path project id and, for a
// directory, the inherit flag. Unimplemented on other systems.
func SetProject(ctx context.Context, path string, id ProjectID) error {
	return errorf(codes.Unimplemented, ErrUnsupported, "project quotas are Linux-only")
}

// Project returns the project ID of path. Unimplemented on other systems.
func Project(ctx context.Context, path string) (ProjectID, error) {
	return 0, errorf(codes.Unimplemented, ErrUnsupported, "project quotas are Linux-only")
}

// SetLimit sets project id's hard limit on the filesystem holding path.
// Unimplemented on other systems.
func SetLimit(ctx context.Context, path string, id ProjectID, bytes int64) error {
	return errorf(codes.Unimplemented, ErrUnsupported, "project quotas are Linux-only")
}

// Get returns project id's usage and limit on the filesystem holding
// path. Unimplemented on other systems.
func Get(ctx context.Context, path string, id ProjectID) (Usage, error) {
	return Usage{}, errorf(codes.Unimplemented, ErrUnsupported, "project quotas are Linux-only")
}
