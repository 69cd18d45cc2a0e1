package idempotency

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/internal/logctx"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/locks"
)

// Interceptor applies locks and the journal to unary CSI calls. Create it
// with New; it is safe for concurrent use.
type Interceptor struct {
	opts Options
	keys map[string]locks.KeyFunc
}

// New returns an Interceptor. It fails only on malformed Options.Keys.
func New(o Options) (*Interceptor, error) {
	o = o.withDefaults()
	keys := make(map[string]locks.KeyFunc, len(o.Keys))
	for m, f := range o.Keys {
		if !strings.HasPrefix(m, "/") || strings.Count(m, "/") != 2 {
			return nil, fmt.Errorf("idempotency: Keys: %q is not a gRPC full method name like %q", m, csi.Controller_CreateVolume_FullMethodName)
		}
		if f != nil {
			keys[m] = f
		}
	}
	return &Interceptor{opts: o, keys: keys}, nil
}

// Locks returns the lock table, for drivers that lock more by hand, for
// journal.Sweep and for metrics (Table.Stats).
func (i *Interceptor) Locks() *locks.Table { return i.opts.Locks }

// UnaryServerInterceptor returns the gRPC interceptor. Install it after
// request validation (which rejects empty names and IDs) and before the
// driver.
func (i *Interceptor) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return i.intercept
}

func (i *Interceptor) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info == nil {
		return handler(ctx, req)
	}
	kf := i.keys[info.FullMethod]
	f, key, create, journaled := journalFlow(req)
	journaled = journaled && i.opts.Journal != nil
	if kf == nil && !journaled {
		return handler(ctx, req) // nothing to lock or record: no allocation
	}
	set := locks.Set{Table: i.opts.Locks, Owner: locks.Owner{Method: info.FullMethod, Since: callStart(ctx)}}
	defer set.Release() // runs on panics too
	if kf != nil {
		if err := set.Acquire(kf(ctx, req)...); err != nil {
			i.opts.Logger.DebugContext(ctx, "lock conflict", slog.String("method", info.FullMethod), slog.String("conflict", err.Error()))
			return nil, err
		}
	}
	if !journaled {
		return handler(ctx, req)
	}
	// The driver's deferred KV writes (KV.DeferPut) are collected here;
	// the journal's Commit or Release takes them into its own transaction,
	// and whatever is left is made durable before the answer goes out. The
	// same context value carries the request, for Request.
	ctx, call := journal.WithCall(ctx, req)
	var resp any
	var err error
	if create {
		resp, err = i.create(ctx, &set, req, handler, f, key)
	} else {
		resp, err = i.delete(ctx, &set, req, handler, f, key)
	}
	if ferr := call.Flush(); ferr != nil {
		i.opts.Logger.WarnContext(ctx, "driver metadata could not be recorded", slog.String("error", ferr.Error()))
		if err == nil {
			return nil, status.Errorf(codes.Unavailable, "idempotency: the driver's metadata could not be recorded (%v); retry", ferr)
		}
	}
	return resp, err
}

// journalFlow returns the flow of a call the journal records, the name (for
// creates) or ID (for deletes) it records under, and whether it creates.
func journalFlow(req any) (f flow, key string, create, ok bool) {
	switch r := req.(type) {
	case *csi.CreateVolumeRequest:
		return volumeFlow, r.GetName(), true, true
	case *csi.CreateSnapshotRequest:
		return snapshotFlow, r.GetName(), true, true
	case *csi.CreateVolumeGroupSnapshotRequest:
		return groupFlow, r.GetName(), true, true
	case *csi.DeleteVolumeRequest:
		return volumeFlow, r.GetVolumeId(), false, true
	case *csi.DeleteSnapshotRequest:
		return snapshotFlow, r.GetSnapshotId(), false, true
	case *csi.DeleteVolumeGroupSnapshotRequest:
		return groupFlow, r.GetGroupSnapshotId(), false, true
	}
	return flow{}, "", false, false
}

// callStart is when the call ctx belongs to started, as the logging
// interceptor recorded it (a clock read costs about as much as a lock),
// else now.
func callStart(ctx context.Context) time.Time {
	if t := logctx.Start(ctx); !t.IsZero() {
		return t
	}
	return time.Now()
}
