package csikit

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/csi/logging"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/locks"
)

// Fencer is implemented by a driver that can cut a node off a volume, so
// that a node which hung rather than died can never write to a volume
// published elsewhere since. A driver that implements it must also serve
// ControllerPublishVolume (ControllerPublisher) and run with
// Options.Journal; NewServer refuses it otherwise.
//
// csikit calls it from ControllerUnpublishVolume, under the volume's lock:
// after the driver's own ControllerUnpublishVolume succeeds, Holds reports
// whether the node still has access; if it does, the pair is recorded as
// fencing in Options.Journal (journal.KindFence), Fence runs, the pair is
// recorded as fenced, and only then does the call answer OK. A Holds or
// Fence that fails makes the call fail with Unavailable, which the CO
// retries; it never answers OK, so the volume is never published
// elsewhere while the node may still write. A ControllerPublishVolume to a
// node fenced off that volume answers FailedPrecondition until an admin
// lifts the fence (Server.Unfence) once the node has restarted clean. A
// ControllerUnpublishVolume without a node ID (unpublish from every node)
// asks Holds and Fence with nodeID "": every node that holds the volume.
//
// docs/fencing.md describes the lifecycle against Kubernetes'
// non-graceful node shutdown (the node.kubernetes.io/out-of-service taint)
// and the attach-detach controller's force detach.
type Fencer interface {
	// Holds reports whether nodeID may still write to volumeID (a
	// mapping, lock, watcher, or recorded client). It answers false, not
	// an error, for a volume that no longer exists: an error keeps the
	// unpublish failing (Unavailable) until Holds can answer.
	Holds(ctx context.Context, volumeID, nodeID string) (bool, error)
	// Fence cuts nodeID off volumeID; after it returns nil no write from
	// nodeID can land. Idempotent.
	Fence(ctx context.Context, volumeID, nodeID string) error
	// Unfence lifts the fence once the node is back and clean.
	// Idempotent.
	Unfence(ctx context.Context, volumeID, nodeID string) error
}

// FencedNode is a node a Server fenced off a volume, as its journal
// records it.
type FencedNode struct {
	VolumeID string
	// NodeID is the fenced node; "" when the volume was unpublished from
	// every node (ControllerUnpublishVolume without a node ID).
	NodeID string
	// Since is when fencing started.
	Since time.Time
	// Done is false while the fence is not confirmed (Fence failed or
	// the controller stopped while it ran): the node is treated as
	// fenced all the same, and the next ControllerUnpublishVolume of the
	// pair calls Fence again.
	Done bool
}

// fencedNodesName is the gauge of the fenced volume/node pairs.
const fencedNodesName = "csikit_fenced_nodes"

// fencing is the server's fencing state: the driver's Fencer, the journal
// that keeps the fenced pairs, and the pairs known in memory (for the
// gauge and listing). All records are written under the volume's lock.
type fencing struct {
	fencer  Fencer
	journal journal.Journal
	locks   func() *locks.Table
	log     *slog.Logger

	mu sync.Mutex
	// pairs are the pairs recorded: every one in the journal when it is
	// a journal.RecordLister, else those fenced since the start.
	pairs map[string]FencedNode // fenceName → pair
}

// fenceName is the journal name (and ID) of a pair: the volume ID's
// length in decimal, a colon, the volume ID, the node ID. It is
// unambiguous whatever the IDs contain.
func fenceName(volumeID, nodeID string) string {
	return strconv.Itoa(len(volumeID)) + ":" + volumeID + nodeID
}

// parseFenceName splits a fenceName.
func parseFenceName(name string) (volumeID, nodeID string, ok bool) {
	n, rest, found := strings.Cut(name, ":")
	l, err := strconv.Atoi(n)
	if !found || err != nil || l < 0 || l > len(rest) || strconv.Itoa(l) != n {
		return "", "", false
	}
	return rest[:l], rest[l:], true
}

func pairOf(rec journal.Record) (FencedNode, bool) {
	v, n, ok := parseFenceName(rec.Name)
	return FencedNode{VolumeID: v, NodeID: n, Since: rec.Reserved, Done: rec.Committed}, ok
}

// setupFencing checks a Fencer driver's prerequisites and loads the
// fenced pairs from the journal. It does nothing for other drivers.
func (s *Server) setupFencing() error {
	f, ok := as[Fencer](s)
	if !ok {
		return nil
	}
	if !s.served[csi.Controller_ControllerPublishVolume_FullMethodName] {
		return fmt.Errorf("csikit: driver %T implements csikit.Fencer but does not serve ControllerPublishVolume: fencing happens at ControllerUnpublishVolume, so implement csikit.ControllerPublisher, or list reflect.TypeFor[csikit.Fencer]() in Options.Disable", s.driver)
	}
	if s.opts.Journal == nil {
		return fmt.Errorf("csikit: driver %T implements csikit.Fencer but Options.Journal is nil: the nodes it fences must be remembered across restarts (journal.KindFence records); set a journal (journal.OpenFile, or one on the backend), or, to describe the driver without its state (Server.CSIDriver), list reflect.TypeFor[csikit.Fencer]() in Options.Disable", s.driver)
	}
	for _, m := range []string{csi.Controller_ControllerPublishVolume_FullMethodName, csi.Controller_ControllerUnpublishVolume_FullMethodName} {
		if k, set := s.opts.LockKeys[m]; set && k == nil {
			return fmt.Errorf("csikit: driver %T implements csikit.Fencer but Options.LockKeys turns locking off for %s: fencing needs the volume's lock", s.driver, m)
		}
	}
	// A journal of the driver's own may not know the fence kind (it
	// checks kinds): refuse it now, not at the first node to fence. Only
	// a refusal of the kind counts; a journal that cannot be reached now
	// is the first call's business.
	probeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, _, perr := s.opts.Journal.LookupName(probeCtx, journal.KindFence, fenceName("csikit-probe", "csikit-probe"))
	cancel()
	if status.Code(perr) == codes.InvalidArgument {
		return fmt.Errorf("csikit: driver %T implements csikit.Fencer but Options.Journal refuses journal.KindFence records (%s): a journal serving a Fencer must store them; docs/fencing.md gives their layout", s.driver, status.Convert(perr).Message())
	}
	fs := &fencing{fencer: f, journal: s.opts.Journal, locks: s.Locks, log: s.log, pairs: map[string]FencedNode{}}
	if l, ok := s.opts.Journal.(journal.RecordLister); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		recs, err := l.Records(ctx, journal.KindFence)
		cancel()
		if err != nil {
			return fmt.Errorf("csikit: reading the fenced nodes from Options.Journal: %s", status.Convert(err).Message())
		}
		for _, rec := range recs {
			if p, ok := pairOf(rec); ok {
				fs.pairs[rec.Name] = p
			}
		}
	}
	s.fence = fs
	return nil
}

// gauge is csikit_fenced_nodes: the number of fenced (or being fenced)
// volume/node pairs.
func (f *fencing) gauge(driver string) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        fencedNodesName,
		Help:        "Volume/node pairs the driver fenced (or is fencing) at ControllerUnpublishVolume and that no admin has unfenced yet; read from the journal at start.",
		ConstLabels: prometheus.Labels{"driver_name": driver},
	}, func() float64 {
		f.mu.Lock()
		defer f.mu.Unlock()
		return float64(len(f.pairs))
	})
}

func (f *fencing) remember(rec journal.Record) {
	if p, ok := pairOf(rec); ok {
		f.mu.Lock()
		f.pairs[rec.Name] = p
		f.mu.Unlock()
	}
}

// unfinished returns a node whose fence off vol started but is not
// confirmed.
func (f *fencing) unfinished(vol string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pairs {
		if p.VolumeID == vol && !p.Done {
			return p.NodeID, true
		}
	}
	return "", false
}

func (f *fencing) forget(name string) {
	f.mu.Lock()
	delete(f.pairs, name)
	f.mu.Unlock()
}

// unavailable is the answer of an unpublish that could not make sure the
// node is cut off: retryable, and never OK.
func unavailable(format string, args ...any) error {
	return status.Errorf(codes.Unavailable, format, args...)
}

// unpublish runs the driver's ControllerUnpublishVolume, then fences the
// node if it still holds the volume. The call holds the volume's lock.
func (f *fencing) unpublish(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest, next unaryCall) (any, error) {
	resp, err := next(ctx, req)
	if err != nil {
		return nil, err
	}
	vol, node := req.GetVolumeId(), req.GetNodeId()
	who := fmt.Sprintf("node %q", node)
	if node == "" {
		who = "the nodes that hold it"
	}
	name := fenceName(vol, node)
	rec, recorded, err := f.journal.LookupName(ctx, journal.KindFence, name)
	if err != nil {
		return nil, unavailable("volume %q was unpublished but the journal cannot tell whether %s was fenced off it: %s; retry", vol, who, status.Convert(err).Message())
	}
	if recorded && rec.Committed {
		return resp, nil
	}
	if !recorded {
		holds, err := f.fencer.Holds(ctx, vol, node)
		if err != nil {
			return nil, unavailable("volume %q was unpublished but whether %s can still write to it is unknown (%s); it is not released until that is known: retry", vol, who, status.Convert(err).Message())
		}
		if !holds {
			return resp, nil
		}
		rec, err = f.journal.Reserve(ctx, journal.Reservation{Kind: journal.KindFence, Name: name, ID: name})
		if err != nil {
			return nil, unavailable("%s still holds volume %q and must be fenced off it, but the journal cannot record the fence: %s; retry", who, vol, status.Convert(err).Message())
		}
		f.remember(rec)
	}
	log := logging.FromContext(ctx)
	if log == nil {
		log = f.log
	}
	log.LogAttrs(ctx, slog.LevelWarn, "fencing a node off a volume it still holds",
		slog.String("volume_id", vol), slog.String("node_id", node))
	if err := f.fencer.Fence(ctx, vol, node); err != nil {
		return nil, unavailable("%s still holds volume %q and could not be fenced off it: %s; the volume stays unavailable to other nodes until the fence succeeds (the CO retries)", who, vol, status.Convert(err).Message())
	}
	if err := f.journal.Commit(ctx, journal.KindFence, name, name, nil); err != nil {
		return nil, unavailable("%s was fenced off volume %q but the journal cannot record it: %s; retry", who, vol, status.Convert(err).Message())
	}
	rec.Committed = true
	f.remember(rec)
	log.LogAttrs(ctx, slog.LevelWarn, "node fenced off volume; lift the fence with Unfence once the node has restarted clean",
		slog.String("volume_id", vol), slog.String("node_id", node))
	return resp, nil
}

// publish refuses a ControllerPublishVolume to a node fenced off the
// volume; the call holds the volume's lock.
func (f *fencing) publish(ctx context.Context, req *csi.ControllerPublishVolumeRequest, next unaryCall) (any, error) {
	vol, node := req.GetVolumeId(), req.GetNodeId()
	rec, fenced, err := f.journal.LookupName(ctx, journal.KindFence, fenceName(vol, node))
	if err != nil {
		return nil, unavailable("the journal cannot tell whether node %q is fenced off volume %q: %s; retry", node, vol, status.Convert(err).Message())
	}
	if fenced {
		return nil, status.Errorf(codes.FailedPrecondition,
			"node %q was fenced off volume %q at %s because it still held the volume when it was unpublished from it; once the node has restarted clean, an admin lifts the fence (csikit.Server.Unfence) and the publish can succeed",
			node, vol, rec.Reserved.UTC().Format(time.RFC3339))
	}
	if other, ok := f.unfinished(vol); ok {
		return nil, unavailable("node %q still holds volume %q and its fence is not confirmed; the volume is published nowhere else until ControllerUnpublishVolume from that node succeeds", other, vol)
	}
	return next(ctx, req)
}

// fenced binds ControllerUnpublishVolume and ControllerPublishVolume
// through the server's fencing when the driver is a Fencer.
func fenced[Req any](r rpc, call func(f *fencing, ctx context.Context, req *Req, next unaryCall) (any, error)) rpc {
	bind := r.bindUnary
	r.bindUnary = func(s *Server) unaryCall {
		c := bind(s)
		if c == nil || !implements[Fencer](s) {
			return c
		}
		// s.fence is set after binding (setupFencing needs the served
		// set), before the server serves.
		return func(ctx context.Context, req any) (any, error) { return call(s.fence, ctx, req.(*Req), c) }
	}
	return r
}

// errNoFencer answers the fencing methods of a server whose driver is no
// Fencer.
var errNoFencer = status.Error(codes.FailedPrecondition, "the CSI driver does not fence nodes (it implements no csikit.Fencer, or Options.Disable lists it)")

// Unfence lifts the fence that keeps nodeID off volumeID: it calls the
// driver's Unfence, then forgets the pair in the journal, so that
// ControllerPublishVolume to the node can succeed again. Call it once the
// node has restarted clean (in Kubernetes, when the admin removes the
// node.kubernetes.io/out-of-service taint after the power cycle), never
// while the node may still hold the volume's old state. It takes the
// volume's lock (Aborted while a call on the volume runs) and is
// idempotent: unfencing a pair that is not fenced calls the driver's
// Unfence all the same and succeeds.
func (s *Server) Unfence(ctx context.Context, volumeID, nodeID string) error {
	f := s.fence
	if f == nil {
		return errNoFencer
	}
	if volumeID == "" {
		return status.Error(codes.InvalidArgument, "Unfence: volume ID missing")
	}
	set := locks.Set{Table: f.locks(), Owner: locks.Owner{Method: "csikit.Server.Unfence"}}
	if err := set.Acquire(locks.Lock{Key: locks.Key{Space: locks.SpaceVolume, ID: volumeID}, Mode: locks.Exclusive}); err != nil {
		return err
	}
	defer set.Release()
	if err := f.fencer.Unfence(ctx, volumeID, nodeID); err != nil {
		return err
	}
	name := fenceName(volumeID, nodeID)
	if err := f.journal.Release(ctx, journal.KindFence, name); err != nil {
		return err
	}
	f.forget(name)
	s.log.LogAttrs(ctx, slog.LevelInfo, "fence lifted", slog.String("volume_id", volumeID), slog.String("node_id", nodeID))
	return nil
}

// FencedNodes lists the volume/node pairs the server has fenced and no
// one has unfenced, by volume then node. The list is read from the
// journal when it is a journal.RecordLister; otherwise it holds only the
// pairs fenced or read since the server started, and the error says so
// (FailedPrecondition) with what is known.
func (s *Server) FencedNodes(ctx context.Context) ([]FencedNode, error) {
	f := s.fence
	if f == nil {
		return nil, errNoFencer
	}
	var out []FencedNode
	var err error
	if l, ok := f.journal.(journal.RecordLister); ok {
		recs, lerr := l.Records(ctx, journal.KindFence)
		if lerr != nil {
			return nil, lerr
		}
		for _, rec := range recs {
			if p, ok := pairOf(rec); ok {
				out = append(out, p)
			}
		}
	} else {
		f.mu.Lock()
		for _, p := range f.pairs {
			out = append(out, p)
		}
		f.mu.Unlock()
		err = status.Error(codes.FailedPrecondition, "the journal cannot list its records (journal.RecordLister): only the pairs fenced since the server started are listed")
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].VolumeID != out[j].VolumeID {
			return out[i].VolumeID < out[j].VolumeID
		}
		return out[i].NodeID < out[j].NodeID
	})
	return out, err
}
