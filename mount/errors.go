package mount

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// codedError is an error with a gRPC code that still unwraps to its cause.
// gRPC servers find the code through the GRPCStatus method, so a driver can
// return it from a CSI handler unchanged.
type codedError struct {
	code codes.Code
	msg  string
	err  error
}

func (e *codedError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *codedError) Unwrap() error { return e.err }

// GRPCStatus reports the error's gRPC status.
func (e *codedError) GRPCStatus() *status.Status { return status.New(e.code, e.Error()) }

func errorf(code codes.Code, cause error, format string, args ...any) error {
	return &codedError{code: code, msg: fmt.Sprintf(format, args...), err: cause}
}

// checkPath rejects paths a request could use to escape where it should go.
func checkPath(what, p string) error {
	switch {
	case p == "":
		return errorf(codes.InvalidArgument, nil, "%s is empty", what)
	case strings.ContainsRune(p, 0):
		return errorf(codes.InvalidArgument, nil, "%s %q contains a NUL byte", what, p)
	case !filepath.IsAbs(p):
		return errorf(codes.InvalidArgument, nil, "%s %q is not an absolute path", what, p)
	case filepath.Clean(p) != p:
		return errorf(codes.InvalidArgument, nil, "%s %q is not clean, want %q", what, p, filepath.Clean(p))
	}
	return nil
}

// ctxError turns a context error into Canceled or DeadlineExceeded.
func ctxError(err error, format string, args ...any) error {
	code := codes.DeadlineExceeded
	if errors.Is(err, context.Canceled) {
		code = codes.Canceled
	}
	return errorf(code, err, format, args...)
}
