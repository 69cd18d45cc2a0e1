package idempotency_test

import (
	"context"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/idempotency"

	"github.com/csikit/csikit/journal"
)

// requestSeer is a Journal that notes, per method, the request each call
// could see through journal.Request.
type requestSeer struct {
	journal.Journal
	mu   sync.Mutex
	seen map[string][]any
}

func (j *requestSeer) note(ctx context.Context, method string) {
	req, _ := journal.Request(ctx)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seen[method] = append(j.seen[method], req)
}

func (j *requestSeer) Reserve(ctx context.Context, r journal.Reservation) (journal.Record, error) {
	j.note(ctx, "Reserve")
	return j.Journal.Reserve(ctx, r)
}

func (j *requestSeer) Commit(ctx context.Context, kind journal.Kind, name, id string, resp []byte) error {
	j.note(ctx, "Commit")
	return j.Journal.Commit(ctx, kind, name, id, resp)
}

func (j *requestSeer) LookupID(ctx context.Context, kind journal.Kind, id string) (journal.Record, bool, error) {
	j.note(ctx, "LookupID")
	return j.Journal.LookupID(ctx, kind, id)
}

func (j *requestSeer) Release(ctx context.Context, kind journal.Kind, id string) error {
	j.note(ctx, "Release")
	return j.Journal.Release(ctx, kind, id)
}

// TestJournalSeesRequest: every Journal method the interceptor calls for a
// create and a delete sees that call's request (a journal kept in the pool
// the parameters name, opened with the request's secrets, needs it), and
// so does the driver's handler.
func TestJournalSeesRequest(t *testing.T) {
	j := &requestSeer{Journal: journal.NewMemory(), seen: map[string][]any{}}
	ic := newIC(t, idempotency.Options{Journal: j})
	ctx := context.Background()

	create := createVol("pvc-1")
	create.Parameters = map[string]string{"pool": "fast"}
	create.Secrets = map[string]string{"userKey": "k"}
	var inHandler any
	id := volID(t, ic, create, func(ctx context.Context, req any) (any, error) {
		inHandler, _ = journal.Request(ctx)
		rid, _ := journal.ReservedID(ctx)
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: rid}}, nil
	})
	if inHandler != any(create) {
		t.Errorf("the create handler saw request %v, want the CreateVolumeRequest", inHandler)
	}
	del := &csi.DeleteVolumeRequest{VolumeId: id, Secrets: map[string]string{"userKey": "k"}}
	if _, err := call(ctx, ic, mDelete, del, okHandler(&csi.DeleteVolumeResponse{})); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"Reserve": create, "Commit": create, "LookupID": del, "Release": del}
	for method, req := range want {
		got := j.seen[method]
		if len(got) == 0 {
			t.Errorf("%s was not called", method)
		}
		for _, g := range got {
			if g != req {
				t.Errorf("%s saw request %v, want %v", method, g, req)
			}
		}
	}

	if req, ok := journal.Request(ctx); ok || req != nil {
		t.Errorf("Request outside a call = %v, %v; want nil, false", req, ok)
	}
	if req, ok := journal.Request(journal.ContextWithRequest(ctx, del)); !ok || req != any(del) {
		t.Errorf("Request(ContextWithRequest) = %v, %v", req, ok)
	}
}
