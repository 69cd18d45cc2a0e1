package testenv_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/internal/testenv"
)

func TestWantCodeReturnsTheStatus(t *testing.T) {
	if st := testenv.WantCode(t, nil, codes.OK); st.Code() != codes.OK {
		t.Fatalf("nil error: status %v", st)
	}
	st := testenv.WantCode(t, status.Error(codes.NotFound, "volume v1 not found"), codes.NotFound)
	if st.Message() != "volume v1 not found" {
		t.Fatalf("message %q", st.Message())
	}
	if st := testenv.WantCode(t, errors.New("plain"), codes.Unknown); st.Message() != "plain" {
		t.Fatalf("plain error: status %v", st)
	}
}

// Many goroutines write whole lines while the test reads: under -race no
// report, and every line arrives whole.
func TestSyncBufferConcurrentWrites(t *testing.T) {
	var b testenv.SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("0123456789\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(string(b.Bytes()), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if l != "0123456789" {
			t.Fatalf("torn line %q", l)
		}
	}
	b.Reset()
	if b.String() != "" {
		t.Fatal("Reset left data")
	}
}
