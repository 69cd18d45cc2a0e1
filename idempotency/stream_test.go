package idempotency_test

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit/idempotency"

	"github.com/csikit/csikit/locks"
)

// fakeStream hands out one request.
type fakeStream struct {
	grpc.ServerStream
	req proto.Message
}

func (f *fakeStream) Context() context.Context { return context.Background() }
func (f *fakeStream) RecvMsg(m any) error {
	proto.Merge(m.(proto.Message), f.req)
	return nil
}

// TestStreamLocks: a SnapshotMetadata stream holds its snapshots shared
// while the handler runs (DeleteSnapshot's exclusive lock fails, another
// reader's shared one succeeds), releases them at the end, and a stream
// whose snapshot is being deleted gets Aborted from RecvMsg.
func TestStreamLocks(t *testing.T) {
	tab := locks.NewTable()
	ic := newIC(t, idempotency.Options{Locks: tab})
	sic := ic.StreamServerInterceptor()
	info := &grpc.StreamServerInfo{FullMethod: csi.SnapshotMetadata_GetMetadataDelta_FullMethodName, IsServerStream: true}
	del := locks.DeleteSnapshotKeys(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: "target"})

	err := sic(nil, &fakeStream{req: &csi.GetMetadataDeltaRequest{BaseSnapshotId: "base", TargetSnapshotId: "target"}}, info,
		func(_ any, ss grpc.ServerStream) error {
			var req csi.GetMetadataDeltaRequest
			if err := ss.RecvMsg(&req); err != nil {
				return err
			}
			if st := tab.Stats(); st.Held != 2 {
				t.Errorf("held %d keys while streaming, want 2 (base and target)", st.Held)
			}
			for _, l := range del {
				if _, ok := tab.TryLock(l.Key, l.Mode, locks.Owner{Method: "DeleteSnapshot"}); ok {
					tab.Unlock(l.Key, l.Mode)
					if l.Key.Space == locks.SpaceSourceSnapshot {
						t.Errorf("DeleteSnapshot got %v while its metadata streams", l.Key)
					}
				}
			}
			reader := locks.SnapshotReadKeys(context.Background(), &csi.GetMetadataAllocatedRequest{SnapshotId: "target"})
			if _, ok := tab.TryLock(reader[0].Key, reader[0].Mode, locks.Owner{Method: "GetMetadataAllocated"}); !ok {
				t.Error("a second reader was refused")
			} else {
				tab.Unlock(reader[0].Key, reader[0].Mode)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if st := tab.Stats(); st.Held != 0 {
		t.Errorf("held %d keys after the stream ended, want 0", st.Held)
	}

	// A delete in progress: the stream's RecvMsg answers Aborted.
	l := del[1]
	if _, ok := tab.TryLock(l.Key, l.Mode, locks.Owner{Method: "DeleteSnapshot"}); !ok {
		t.Fatal("setup: lock")
	}
	defer tab.Unlock(l.Key, l.Mode)
	ran := false
	err = sic(nil, &fakeStream{req: &csi.GetMetadataAllocatedRequest{SnapshotId: "target"}},
		&grpc.StreamServerInfo{FullMethod: csi.SnapshotMetadata_GetMetadataAllocated_FullMethodName},
		func(_ any, ss grpc.ServerStream) error {
			var req csi.GetMetadataAllocatedRequest
			if err := ss.RecvMsg(&req); err != nil {
				return err
			}
			ran = true
			return nil
		})
	if status.Code(err) != codes.Aborted || ran {
		t.Errorf("stream during a delete: %v (handler ran past RecvMsg: %v), want Aborted", err, ran)
	}
}
