package journal_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/journal"
)

func TestRequireReservedID(t *testing.T) {
	_, err := journal.RequireReservedID(context.Background())
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "Options.Journal") {
		t.Fatalf("without a reservation: %v", err)
	}
	id, err := journal.RequireReservedID(journal.ContextWithReservedID(context.Background(), "vol-7"))
	if err != nil || id != "vol-7" {
		t.Fatalf("with a reservation: %q, %v", id, err)
	}
}
