package quota

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/codederr"
)

// ProjectID identifies a project on one filesystem. 0 is the default
// project of every file and cannot be given a limit here.
type ProjectID uint32

// Usage is what a project holds and may hold.
type Usage struct {
	// Bytes is the space the project's files take on disk.
	Bytes int64
	// Inodes is the number of the project's files and directories.
	Inodes int64
	// LimitBytes is the hard limit on Bytes; 0 means none.
	LimitBytes int64
}

// ErrUnsupported is what Check's error unwraps to when the filesystem has
// no enforced project quotas (errors.Is(err, quota.ErrUnsupported)).
var ErrUnsupported = errors.New("project quotas are not enforced on this filesystem")

var errorf = codederr.Errorf

// unsupported is the FailedPrecondition error for a filesystem without
// enforced project quotas.
func unsupported(path, why string) error {
	return errorf(codes.FailedPrecondition, ErrUnsupported, "%s: %s", path, why)
}
