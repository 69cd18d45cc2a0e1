package idempotency

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/internal/logctx"
)

// Interceptor applies locks and the journal to unary CSI calls. Create it
// with New; it is safe for concurrent use.
type Interceptor struct {
	opts Options
	keys map[string]KeyFunc
}

// New returns an Interceptor. It fails only on malformed Options.Keys.
func New(o Options) (*Interceptor, error) {
	o = o.withDefaults()
	keys := DefaultKeys()
	if o.BaseKeys != nil {
		keys = maps.Clone(o.BaseKeys)
	}
	for m, f := range o.Keys {
		if !strings.HasPrefix(m, "/") || strings.Count(m, "/") != 2 {
			return nil, fmt.Errorf("idempotency: Keys: %q is not a gRPC full method name like %q", m, csi.Controller_CreateVolume_FullMethodName)
		}
		if f == nil {
			delete(keys, m)
		} else {
			keys[m] = f
		}
	}
	return &Interceptor{opts: o, keys: keys}, nil
}

// LockStats reports the interceptor's held locks, for metrics.
func (i *Interceptor) LockStats() LockStats { return i.opts.Locks.Stats() }

// Locks returns the lock table, for drivers that lock more by hand.
func (i *Interceptor) Locks() *LockTable { return i.opts.Locks }

// UnaryServerInterceptor returns the gRPC interceptor. Install it after
// request validation (which rejects empty names and IDs) and before the
// driver.
func (i *Interceptor) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return i.intercept
}

type reservedIDKey struct{}

// ReservedID returns the ID the journal reserved for the create call running
// in ctx. A driver that creates its backend object under this ID is
// idempotent across retries and crashes.
func ReservedID(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(reservedIDKey{}).(string)
	return id, ok
}

// ContextWithReservedID returns ctx carrying id as ReservedID; for testing
// drivers without the interceptor.
func ContextWithReservedID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, reservedIDKey{}, id)
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
	set := lockSet{t: i.opts.Locks, owner: Owner{Method: info.FullMethod, Since: callStart(ctx)}}
	defer set.releaseAll() // runs on panics too
	if kf != nil {
		if err := set.acquire(kf(ctx, req)...); err != nil {
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
	ctx, cw := withCallWrites(ctx, req)
	var resp any
	var err error
	if create {
		resp, err = i.create(ctx, &set, req, handler, f, key)
	} else {
		resp, err = i.delete(ctx, &set, req, handler, f, key)
	}
	if ferr := cw.flush(); ferr != nil {
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

// lockSet holds the locks of one call and releases them all at its end.
// It lives on the caller's stack: the first locks sit in buf (no slice
// into itself, which would move the set to the heap), more in extra, and
// each remembers its key's hash so releasing does not hash again.
type lockSet struct {
	t     *LockTable
	owner Owner
	n     int // locks held: buf[:min(n, len(buf))], then extra
	buf   [4]heldLock
	extra []heldLock
}

// heldLock is a lock of a lockSet and its key's hash in the set's table.
type heldLock struct {
	Lock
	h uint64
}

func (s *lockSet) at(i int) *heldLock {
	if i < len(s.buf) {
		return &s.buf[i]
	}
	return &s.extra[i-len(s.buf)]
}

func (s *lockSet) push(l heldLock) {
	if s.n < len(s.buf) {
		s.buf[s.n] = l
	} else {
		s.extra = append(s.extra, l)
	}
	s.n++
}

// releaseFrom releases the locks from the i-th on.
func (s *lockSet) releaseFrom(i int) {
	for j := i; j < s.n; j++ {
		l := s.at(j)
		s.t.unlock(l.h, l.Key, l.Mode)
	}
	s.n = i
	if i <= len(s.buf) {
		s.extra = s.extra[:0]
	} else {
		s.extra = s.extra[:i-len(s.buf)]
	}
}

// acquire takes every lock or none; it answers Aborted naming the holder.
// Locks with an empty ID and keys this call already holds are skipped.
func (s *lockSet) acquire(locks ...Lock) error {
	start := s.n
next:
	for _, l := range locks {
		if l.Key.ID == "" {
			continue
		}
		for j := range s.n {
			if s.at(j).Key == l.Key {
				continue next
			}
		}
		h := s.t.hashOf(l.Key)
		if holder, ok := s.t.tryLock(h, l.Key, l.Mode, s.owner); !ok {
			s.releaseFrom(start)
			return status.Error(codes.Aborted, busyMessage(l.Key, holder))
		}
		s.push(heldLock{Lock: l, h: h})
	}
	return nil
}

func (s *lockSet) releaseAll() { s.releaseFrom(0) }
