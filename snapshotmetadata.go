package csikit

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// SnapshotMetadataReader serves the SnapshotMetadata service (changed-block
// tracking for backup software; alpha in CSI v1.14, so served only with
// Options.Alpha), advertised as the plugin capability
// SNAPSHOT_METADATA_SERVICE. The spec requires both RPCs of a plugin that
// offers the service.
//
// Unlike the spec's SnapshotMetadataServer, the methods do not see the
// gRPC stream: they report ranges to a BlockMetadataStream, which batches
// them into messages of at most max_results ranges (and at most
// MaxBlockMetadataPerMessage), drops what ends before starting_offset,
// checks the spec's ordering rules and blocks while the client is not
// reading, so a driver producing ranges faster than the client consumes
// them is slowed down rather than buffered without bound. Each message is
// sent as soon as it is full, from a goroutine of the server's, while the
// driver goes on producing. A message the client does not accept within
// Options.MetadataSendTimeout ends the call with DeadlineExceeded (the
// context the driver got is cancelled). The request has passed validation
// (OutOfRange for a negative starting_offset) and its snapshots are locked
// shared: DeleteSnapshot of them answers Aborted until the call ends.
// Return NotFound for an unknown snapshot, and the error Add returned when
// it fails.
type SnapshotMetadataReader interface {
	// GetMetadataAllocated reports the allocated ranges of a snapshot.
	GetMetadataAllocated(context.Context, *csi.GetMetadataAllocatedRequest, *BlockMetadataStream) error
	// GetMetadataDelta reports the ranges that differ between the base and
	// the target snapshot (FailedPrecondition when the backend tracks no
	// changes).
	GetMetadataDelta(context.Context, *csi.GetMetadataDeltaRequest, *BlockMetadataStream) error
}

// DefaultMaxResults is the number of ranges per message when the request's
// max_results is 0.
const DefaultMaxResults = 1024

// MaxBlockMetadataPerMessage caps the ranges per message whatever
// max_results asks (the spec lets the plugin return fewer). A range
// encodes in at most 24 bytes, so a message stays under 1.6 MiB, well
// within gRPC's default 4 MiB receive limit, and a call holds at most two
// batches in memory (one being sent, one being filled) however large
// max_results is.
const MaxBlockMetadataPerMessage = 65536

// DefaultMetadataSendTimeout is Options.MetadataSendTimeout when zero.
const DefaultMetadataSendTimeout = 10 * time.Minute

// BlockMetadataStream sends block metadata to the client of one
// SnapshotMetadata call as the driver produces it. It is used by one
// goroutine, the call's.
type BlockMetadataStream struct {
	ctx      context.Context
	start    int64
	max      int
	send     func(t csi.BlockMetadataType, capacity int64, batch []*csi.BlockMetadata) error
	begun    bool
	typ      csi.BlockMetadataType
	capacity int64
	end      int64 // end of the last range added; the next must not start before it
	size     int64 // the size of FIXED_LENGTH ranges, once known
	batch    []*csi.BlockMetadata
	// recycle, in the server's streams, returns sent batches (with their
	// ranges) for reuse; nil when send may keep what it is given.
	recycle <-chan []*csi.BlockMetadata
}

// NewBlockMetadataStream returns a stream that batches ranges from
// startingOffset into groups of at most maxResults (DefaultMaxResults when
// 0, MaxBlockMetadataPerMessage when larger) and passes each group to send,
// which may keep it. The server builds one per call; the function is
// exported for testing drivers without a server.
func NewBlockMetadataStream(ctx context.Context, startingOffset int64, maxResults int32,
	send func(t csi.BlockMetadataType, volumeCapacityBytes int64, batch []*csi.BlockMetadata) error) *BlockMetadataStream {
	limit := int(maxResults)
	if limit <= 0 {
		limit = DefaultMaxResults
	}
	limit = min(limit, MaxBlockMetadataPerMessage)
	return &BlockMetadataStream{ctx: ctx, start: startingOffset, max: limit, send: send}
}

// StartingOffset is the request's starting_offset. Ranges that end at or
// before it are dropped by Add, so a driver may start anywhere before it;
// starting at it saves work.
func (w *BlockMetadataStream) StartingOffset() int64 { return w.start }

// Begin declares the metadata type and the volume's capacity, which every
// message carries. Call it once, before Add, also when there are no ranges
// to report. It answers OutOfRange when starting_offset lies beyond the
// volume.
func (w *BlockMetadataStream) Begin(t csi.BlockMetadataType, volumeCapacityBytes int64) error {
	if w.begun {
		return status.Error(codes.Internal, "csikit: BlockMetadataStream.Begin called twice")
	}
	if t != csi.BlockMetadataType_FIXED_LENGTH && t != csi.BlockMetadataType_VARIABLE_LENGTH {
		return status.Errorf(codes.Internal, "csikit: BlockMetadataStream.Begin: type %v, want FIXED_LENGTH or VARIABLE_LENGTH", t)
	}
	if volumeCapacityBytes <= 0 {
		return status.Errorf(codes.Internal, "csikit: BlockMetadataStream.Begin: volume capacity %d, want > 0", volumeCapacityBytes)
	}
	if w.start > volumeCapacityBytes {
		return status.Errorf(codes.OutOfRange, "starting_offset %d exceeds the volume size %d", w.start, volumeCapacityBytes)
	}
	w.begun, w.typ, w.capacity = true, t, volumeCapacityBytes
	return nil
}

// Add reports the range [offset, offset+size). Ranges come in increasing
// order without overlap, inside the volume, with size > 0 — and, for
// FIXED_LENGTH, all of one size; a range that breaks these rules is a
// driver bug and answers Internal. When a message's worth of ranges is
// pending, Add hands them to the sender and blocks while the previous
// message is still being sent, which happens at the client's pace (gRPC
// flow control). It returns the error of the send (the client went away,
// the call was cancelled, the client stopped reading for
// Options.MetadataSendTimeout): return it.
func (w *BlockMetadataStream) Add(offset, size int64) error {
	if !w.begun {
		return status.Error(codes.Internal, "csikit: BlockMetadataStream.Add before Begin")
	}
	switch {
	case size <= 0:
		return w.bug("size %d, want > 0", size)
	case offset < w.end:
		return w.bug("range at %d starts before the end of the previous one (%d): ranges must be sorted and must not overlap", offset, w.end)
	case offset > w.capacity-size:
		return w.bug("range [%d, +%d) ends beyond the volume (%d bytes)", offset, size, w.capacity)
	case w.typ == csi.BlockMetadataType_FIXED_LENGTH && w.size != 0 && size != w.size:
		return w.bug("FIXED_LENGTH range of %d bytes after ones of %d", size, w.size)
	}
	w.end, w.size = offset+size, size
	if offset+size <= w.start {
		return nil // before starting_offset: the client has it already
	}
	if w.ctx.Err() != nil {
		return contextError(w.ctx)
	}
	// The batch grows with what is added (never to max_results up front);
	// a recycled batch's ranges are overwritten in place.
	if n := len(w.batch); n < cap(w.batch) {
		w.batch = w.batch[:n+1]
		if m := w.batch[n]; m != nil {
			m.ByteOffset, m.SizeBytes = offset, size
		} else {
			w.batch[n] = &csi.BlockMetadata{ByteOffset: offset, SizeBytes: size}
		}
	} else {
		w.batch = append(w.batch, &csi.BlockMetadata{ByteOffset: offset, SizeBytes: size})
	}
	if len(w.batch) >= w.max {
		return w.Flush()
	}
	return nil
}

// Flush sends the pending ranges now, e.g. before a slow stretch of the
// scan. The server flushes after the driver returns.
func (w *BlockMetadataStream) Flush() error {
	if len(w.batch) == 0 {
		return nil
	}
	batch := w.batch
	w.batch = nil
	if err := w.send(w.typ, w.capacity, batch); err != nil {
		return err
	}
	select {
	case b := <-w.recycle: // a nil channel never is ready
		w.batch = b
	default:
	}
	return nil
}

func (w *BlockMetadataStream) bug(format string, args ...any) error {
	return status.Errorf(codes.Internal, "csikit: BlockMetadataStream.Add: %s", fmt.Sprintf(format, args...))
}

// finish ends a call whose driver returned nil.
func (w *BlockMetadataStream) finish() error {
	if !w.begun {
		return status.Error(codes.Internal, "csikit: the driver returned without calling BlockMetadataStream.Begin")
	}
	return w.Flush()
}

// metadataStream is a SnapshotMetadata entry: call is the
// SnapshotMetadataReader method, offset and max read the request, and resp
// builds one response message.
func metadataStream[Req, Resp any](method string,
	call func(SnapshotMetadataReader, context.Context, *Req, *BlockMetadataStream) error,
	offset func(*Req) int64, maxResults func(*Req) int32,
	resp func(t csi.BlockMetadataType, capacity int64, batch []*csi.BlockMetadata) *Resp) rpc {
	return rpc{
		method: method,
		iface:  reflect.TypeFor[SnapshotMetadataReader](),
		newReq: func() any { return new(Req) },
		bindStream: func(s *Server) streamCall {
			d, ok := as[SnapshotMetadataReader](s)
			if !ok {
				return nil
			}
			timeout := s.opts.MetadataSendTimeout
			if timeout <= 0 {
				timeout = DefaultMetadataSendTimeout
			}
			msg := func(t csi.BlockMetadataType, c int64, b []*csi.BlockMetadata) any { return resp(t, c, b) }
			return func(req any, ss grpc.ServerStream) error {
				r := req.(*Req)
				p := startPump(ss.Context(), ss, timeout, msg)
				w := NewBlockMetadataStream(p.ctx, offset(r), maxResults(r), p.send)
				w.recycle = p.free
				err := call(d, p.ctx, r, w)
				if err == nil {
					err = w.finish()
				}
				return p.stop(err)
			}
		},
	}
}

func allocatedResponse(t csi.BlockMetadataType, c int64, b []*csi.BlockMetadata) *csi.GetMetadataAllocatedResponse {
	return &csi.GetMetadataAllocatedResponse{BlockMetadataType: t, VolumeCapacityBytes: c, BlockMetadata: b}
}

func deltaResponse(t csi.BlockMetadataType, c int64, b []*csi.BlockMetadata) *csi.GetMetadataDeltaResponse {
	return &csi.GetMetadataDeltaResponse{BlockMetadataType: t, VolumeCapacityBytes: c, BlockMetadata: b}
}
