package testenv

import (
	"bytes"
	"os"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// WantCode fails the test at once unless err carries the gRPC code want
// (status.Code: a nil error is OK, a non-status error Unknown). It returns
// err's status, for checks of the message.
func WantCode(tb testing.TB, err error, want codes.Code) *status.Status {
	tb.Helper()
	st := status.Convert(err)
	if st.Code() != want {
		tb.Fatalf("got code %v (err %v), want %v", st.Code(), err, want)
	}
	return st
}

// RequireLoopDevices skips (or fails under Strict) unless the process runs
// as root on a kernel with loop devices (/dev/loop-control).
func RequireLoopDevices(tb testing.TB) {
	tb.Helper()
	RequireRoot(tb, "attaches loop devices")
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		Skipf(tb, "needs loop devices: %v", err)
	}
}

// SyncBuffer is a bytes.Buffer that a log handler or a child process may
// write from several goroutines while the test reads it. The zero value is
// empty and ready to use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes returns a copy of what was written so far.
func (b *SyncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Reset empties the buffer.
func (b *SyncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}
