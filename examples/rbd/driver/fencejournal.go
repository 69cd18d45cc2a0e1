package driver

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/ceph/go-ceph/rados"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/journal"
)

// csikit keeps the nodes it fenced as journal records of kind
// journal.KindFence, named (and identified) <len(volume ID)>:<volume
// ID><node ID> (docs/fencing.md). The driver keeps them in the volume's
// access object, key journal/<node>, beside its own fence/<node> record:
// found with the volume's credentials, gone with the volume.
const fenceJournalKey = "journal/"

// fenceJournalRecord is a journal/<node> value.
type fenceJournalRecord struct {
	Reserved  time.Time `json:"reserved"`
	Committed bool      `json:"committed"`
}

// parseFenceName splits a KindFence record's name.
func parseFenceName(name string) (volumeID, nodeID string, ok bool) {
	n, rest, found := strings.Cut(name, ":")
	l, err := strconv.Atoi(n)
	if !found || err != nil || l < 0 || l > len(rest) || strconv.Itoa(l) != n {
		return "", "", false
	}
	return rest[:l], rest[l:], true
}

// fenceJournal serves the KindFence calls of requestJournal.
type fenceJournal struct{ d *Driver }

// open returns the volume and node a fence record name names and the
// access namespace of the volume's pool; ok is false for a name that is
// not one of this driver's volumes (or its pool is gone): no record.
func (f fenceJournal) open(ctx context.Context, name string) (id volumeID, node string, done func(), io *rados.IOContext, ok bool, err error) {
	vol, node, ok := parseFenceName(name)
	if !ok {
		return id, "", nil, nil, false, nil
	}
	id, io2, _, done, ok, err := f.d.openAccess(ctx, vol)
	if err != nil || !ok {
		return id, node, nil, nil, false, err
	}
	return id, node, done, io2, true, nil
}

func (f fenceJournal) read(ctx context.Context, name string) (journal.Record, bool, error) {
	id, node, done, io, ok, err := f.open(ctx, name)
	if err != nil || !ok {
		return journal.Record{}, false, err
	}
	defer done()
	a, err := readAccess(io, id)
	if err != nil {
		return journal.Record{}, false, err
	}
	r, ok := a.journal[node]
	if !ok {
		return journal.Record{}, false, nil
	}
	return journal.Record{Kind: journal.KindFence, Name: name, ID: name, Reserved: r.Reserved, Committed: r.Committed}, true, nil
}

func (f fenceJournal) reserve(ctx context.Context, r journal.Reservation) (journal.Record, error) {
	if rec, ok, err := f.read(ctx, r.Name); err != nil || ok {
		return rec, err
	}
	id, node, done, io, ok, err := f.open(ctx, r.Name)
	if err != nil {
		return journal.Record{}, err
	}
	if !ok {
		return journal.Record{}, status.Errorf(codes.InvalidArgument, "journal: fence record %q names no volume of this driver", r.Name)
	}
	defer done()
	now := time.Now()
	if err := updateAccess(io, id, map[string]any{fenceJournalKey + node: fenceJournalRecord{Reserved: now}}); err != nil {
		return journal.Record{}, err
	}
	return journal.Record{Kind: journal.KindFence, Name: r.Name, ID: r.Name, Reserved: now, Fresh: true}, nil
}

func (f fenceJournal) commit(ctx context.Context, name string) error {
	rec, ok, err := f.read(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return status.Errorf(codes.FailedPrecondition, "journal: commit of fence record %q, which is not reserved", name)
	}
	id, node, done, io, _, err := f.open(ctx, name)
	if err != nil {
		return err
	}
	defer done()
	return updateAccess(io, id, map[string]any{fenceJournalKey + node: fenceJournalRecord{Reserved: rec.Reserved, Committed: true}})
}

func (f fenceJournal) release(ctx context.Context, name string) error {
	id, node, done, io, ok, err := f.open(ctx, name)
	if err != nil || !ok {
		return err
	}
	defer done()
	return updateAccess(io, id, nil, fenceJournalKey+node)
}

// withRequest is a gRPC interceptor that gives ControllerPublishVolume
// and ControllerUnpublishVolume their request as journal.Request, as
// csikit's idempotency layer does for creates and deletes: csikit looks up
// its fence records in the journal before the driver runs, and the
// driver's journal needs the request's secrets to read them.
func withRequest(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	switch req.(type) {
	case *csi.ControllerPublishVolumeRequest, *csi.ControllerUnpublishVolumeRequest:
		if _, ok := journal.Request(ctx); !ok {
			ctx = journal.ContextWithRequest(ctx, req)
		}
	}
	return next(ctx, req)
}
