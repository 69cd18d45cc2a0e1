package command

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is a command that did not succeed: it could not start, exited
// non-zero, was killed by a signal, or was stopped because its context
// ended or its timeout passed. A handler may return it as is: its gRPC
// code is DeadlineExceeded for a timeout or an expired context, Canceled
// for a cancelled one, else Internal.
type Error struct {
	// Command is the program's name as given to Run (never its
	// arguments, which may name things a log should not).
	Command string
	// ExitCode is the exit status, -1 when the program did not exit on
	// its own (it was killed, or never started).
	ExitCode int
	// Signal is the signal that ended the program, 0 when it exited or
	// never started.
	Signal syscall.Signal
	// Stdout and Stderr are what it wrote, as far as kept (Truncated says
	// when a stream was cut), with Options.Secret redacted.
	Stdout, Stderr []byte
	// Truncated reports that a stream wrote more than Options.MaxOutput.
	Truncated bool
	// Timeout is Options.Timeout when that is what stopped the program.
	Timeout time.Duration
	// Err is the cause other than the exit status: context.Canceled or
	// context.DeadlineExceeded when the program was stopped, the start
	// error (exec.ErrNotFound, a permission error), exec.ErrWaitDelay
	// when a forked helper held the output open past the grace; nil when
	// the program simply failed.
	Err error
}

// Summary is the cause as the program stated it: Summarize of its
// streams.
func (e *Error) Summary() string { return Summarize(e.Stdout, e.Stderr) }

// Error names the command, how it ended and the summarised cause:
// "mkfs.xfs exited with status 1: Filesystem must be larger than 300MB.".
func (e *Error) Error() string {
	var s string
	switch {
	case e.Timeout > 0:
		s = fmt.Sprintf("%s timed out after %v and was killed", e.Command, e.Timeout)
	case errors.Is(e.Err, context.Canceled):
		s = e.Command + " was cancelled and killed"
	case errors.Is(e.Err, context.DeadlineExceeded):
		s = e.Command + " was killed at the call's deadline"
	case e.ExitCode >= 0:
		s = fmt.Sprintf("%s exited with status %d", e.Command, e.ExitCode)
	case errors.Is(e.Err, exec.ErrWaitDelay):
		s = e.Command + " exited, but a process it started held its output open past the grace and was killed"
	case e.Signal != 0:
		s = fmt.Sprintf("%s was killed by signal %d (%v)", e.Command, int(e.Signal), e.Signal)
	case e.Err != nil:
		s = fmt.Sprintf("%s: %v", e.Command, e.Err)
	default:
		s = e.Command + " failed"
	}
	if sum := e.Summary(); sum != "" {
		s += ": " + sum
	}
	return s
}

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// Code is the error's gRPC code: DeadlineExceeded when a timeout or the
// context's deadline stopped the program, Canceled when the context was
// cancelled, else Internal.
func (e *Error) Code() codes.Code {
	switch {
	case errors.Is(e.Err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(e.Err, context.Canceled):
		return codes.Canceled
	}
	return codes.Internal
}

// GRPCStatus is the error as a gRPC status, with Code and Error.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code(), e.Error()) }
