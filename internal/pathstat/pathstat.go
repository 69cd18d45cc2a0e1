// Package pathstat holds what csikit's stats and health packages share
// about a path taken from a request: checking it, bounding calls that may
// hang on it, and reading its mount from /proc/self/mountinfo.
package pathstat

import (
	"context"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CleanPath checks a path taken from a request: it must be absolute and
// free of NUL bytes. The result is lexically cleaned.
func CleanPath(field, path string) (string, error) {
	switch {
	case path == "":
		return "", status.Errorf(codes.InvalidArgument, "%s is empty: want the absolute path the volume was staged or published at", field)
	case strings.IndexByte(path, 0) >= 0:
		return "", status.Errorf(codes.InvalidArgument, "%s contains a NUL byte", field)
	case !filepath.IsAbs(path):
		return "", status.Errorf(codes.InvalidArgument, "%s %q is relative: want an absolute path", field, path)
	}
	return filepath.Clean(path), nil
}

// Bounded runs f, returning early with the context's status when ctx ends
// first. The goroutine running f then finishes on its own when f returns
// (a syscall stuck in the kernel cannot be interrupted from Go).
func Bounded[T any](ctx context.Context, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, status.FromContextError(err).Err()
	}
	if ctx.Done() == nil { // cannot end: no need for a goroutine
		return f()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, status.FromContextError(ctx.Err()).Err()
	}
}
