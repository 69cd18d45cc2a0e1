package endpoint

import (
	"context"
	"errors"
	"io/fs"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// codedError is an error with a gRPC code that still wraps its cause, so both
// status.Code(err) and errors.Is(err, fs.ErrPermission) work.
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

// GRPCStatus lets status.FromError and status.Code see the code.
func (e *codedError) GRPCStatus() *status.Status { return status.New(e.code, e.Error()) }

// wrap attaches a code derived from err (permission, context) or fallback.
func wrap(fallback codes.Code, msg string, err error) error {
	code := fallback
	switch {
	case errors.Is(err, fs.ErrPermission):
		code = codes.PermissionDenied
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return &codedError{code: code, msg: msg, err: err}
}
