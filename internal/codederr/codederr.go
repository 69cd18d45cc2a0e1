// Package codederr holds the error type csikit's node helpers return: an
// error with a gRPC code that still unwraps to its cause, so a driver can
// return it from a CSI handler unchanged (gRPC finds the code through the
// GRPCStatus method) while errors.Is(err, fs.ErrNotExist) and the like keep
// working. mount/, block/ and csi/endpoint share it.
package codederr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is an error with a gRPC code that still unwraps to its cause.
type Error struct {
	code codes.Code
	msg  string
	err  error
}

func (e *Error) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.err }

// GRPCStatus reports the error's gRPC status.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.code, e.Error()) }

// Errorf returns an Error with code, a formatted message and cause (which
// may be nil).
func Errorf(code codes.Code, cause error, format string, args ...any) error {
	return &Error{code: code, msg: fmt.Sprintf(format, args...), err: cause}
}

// Wrap returns an Error whose code is derived from err — PermissionDenied,
// Canceled or DeadlineExceeded — or fallback.
func Wrap(fallback codes.Code, msg string, err error) error {
	code := fallback
	switch {
	case errors.Is(err, fs.ErrPermission):
		code = codes.PermissionDenied
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return &Error{code: code, msg: msg, err: err}
}

// FromContext turns a context error into Canceled or DeadlineExceeded.
func FromContext(err error, format string, args ...any) error {
	code := codes.DeadlineExceeded
	if errors.Is(err, context.Canceled) {
		code = codes.Canceled
	}
	return Errorf(code, err, format, args...)
}

// CheckPath rejects paths a request could use to escape where it should
// go: empty, with a NUL byte, relative, or not clean. what names the path
// in the message.
func CheckPath(what, p string) error {
	switch {
	case p == "":
		return Errorf(codes.InvalidArgument, nil, "%s is empty", what)
	case strings.ContainsRune(p, 0):
		return Errorf(codes.InvalidArgument, nil, "%s %q contains a NUL byte", what, p)
	case !filepath.IsAbs(p):
		return Errorf(codes.InvalidArgument, nil, "%s %q is not an absolute path", what, p)
	case filepath.Clean(p) != p:
		return Errorf(codes.InvalidArgument, nil, "%s %q is not clean, want %q", what, p, filepath.Clean(p))
	}
	return nil
}
