//go:build !linux

package fstree

import (
	"context"

	"github.com/csikit/csikit/internal/codederr"
	"google.golang.org/grpc/codes"
)

func unsupported() error {
	return codederr.Errorf(codes.Unimplemented, nil, "fstree is supported on Linux only")
}

func remove(ctx context.Context, dir string, opts RemoveOptions) error { return unsupported() }

func copyTree(ctx context.Context, src, dst string, opts CopyOptions) (CopyStats, error) {
	return CopyStats{}, unsupported()
}

func usage(ctx context.Context, dir string) (UsageStats, error) { return UsageStats{}, unsupported() }
