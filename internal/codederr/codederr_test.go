package codederr_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/internal/codederr"
)

func TestErrorCarriesCodeAndCause(t *testing.T) {
	err := codederr.Errorf(codes.NotFound, fs.ErrNotExist, "device %s", "/dev/x")
	if got := status.Code(err); got != codes.NotFound {
		t.Errorf("code: got %v, want NotFound", got)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("errors.Is(err, fs.ErrNotExist): got false, want true")
	}
	if got, want := err.Error(), "device /dev/x: file does not exist"; got != want {
		t.Errorf("message: got %q, want %q", got, want)
	}
	// Wrapped again, the code is still found.
	if got := status.Code(fmt.Errorf("stage: %w", err)); got != codes.NotFound {
		t.Errorf("wrapped code: got %v, want NotFound", got)
	}
}

func TestWrapAndFromContext(t *testing.T) {
	for _, c := range []struct {
		err  error
		want codes.Code
	}{
		{fs.ErrPermission, codes.PermissionDenied},
		{context.Canceled, codes.Canceled},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{errors.New("other"), codes.Internal},
	} {
		if got := status.Code(codederr.Wrap(codes.Internal, "op", c.err)); got != c.want {
			t.Errorf("Wrap(%v): got %v, want %v", c.err, got, c.want)
		}
	}
	if got := status.Code(codederr.FromContext(context.Canceled, "x")); got != codes.Canceled {
		t.Errorf("FromContext(Canceled): got %v", got)
	}
	if got := status.Code(codederr.FromContext(context.DeadlineExceeded, "x")); got != codes.DeadlineExceeded {
		t.Errorf("FromContext(DeadlineExceeded): got %v", got)
	}
}

func TestCheckPath(t *testing.T) {
	for p, ok := range map[string]bool{
		"/var/lib/kubelet/pods/x/mount": true,
		"":                              false,
		"relative/path":                 false,
		"/a/../etc":                     false,
		"/a//b":                         false,
		"/a\x00b":                       false,
	} {
		err := codederr.CheckPath("target", p)
		if (err == nil) != ok {
			t.Errorf("CheckPath(%q): got %v, want ok=%v", p, err, ok)
		}
		if err != nil && status.Code(err) != codes.InvalidArgument {
			t.Errorf("CheckPath(%q): got code %v, want InvalidArgument", p, status.Code(err))
		}
	}
}
