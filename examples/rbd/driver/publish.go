package driver

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ceph/go-ceph/rados"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Who may use a volume is kept in its access object: an object named
// after the image in RADOS namespace AccessNamespace of the image's pool,
// whose omap holds one key per node and fact:
//
//	attach/<node>  ControllerPublishVolume published the volume to node
//	stage/<node>   node staged it; the value names the Ceph client
//	               instances (address/nonce) of its mapping
//	fence/<node>   those clients are blocklisted until a time (Fence)
//
// The record of a stage outlives the node: a node that hangs, or dies
// without unstaging, is still found, with the clients to blocklist, though
// its watch on the image lapsed long ago. Plain omap writes, not image
// metadata: librbd proxies metadata updates to the exclusive-lock owner,
// which is the very client that may be frozen.
const AccessNamespace = "csikit-access"

const (
	attachKey = "attach/"
	stageKey  = "stage/"
	fenceKey  = "fence/"
)

// attachRecord is an attach/<node> value.
type attachRecord struct {
	ReadOnly bool `json:"readOnly"`
}

// stageRecordCeph is a stage/<node> value: the Ceph client instances of
// the node's mapping (empty while the map is in progress).
type stageRecordCeph struct {
	Addrs []string  `json:"addrs"`
	Since time.Time `json:"since"`
}

// fenceRecord is a fence/<node> value. Renewing is set while a renewer
// (RenewFences) removes and re-adds the entries.
type fenceRecord struct {
	Addrs    []string   `json:"addrs"`
	At       time.Time  `json:"at"`
	Until    time.Time  `json:"until"`
	Renewing *time.Time `json:"renewing,omitempty"`
}

// covers reports whether the fence is in force for every one of addrs.
func (f fenceRecord) covers(addrs []string, now time.Time) bool {
	if now.After(f.Until) {
		return false
	}
	for _, a := range addrs {
		if !slices.Contains(f.Addrs, a) {
			return false
		}
	}
	return true
}

// access is a volume's access object, decoded.
type access struct {
	attach map[string]attachRecord
	stage  map[string]stageRecordCeph
	fence  map[string]fenceRecord
	// journal holds csikit's KindFence records (fencejournal.go).
	journal map[string]fenceJournalRecord
}

// nodes returns the sorted keys of m.
func nodes[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// accessIO opens the access namespace of volume id's pool.
func (d *Driver) accessIO(ctx context.Context, creds Credentials, id volumeID) (*rados.IOContext, func(), error) {
	name, err := d.poolName(ctx, creds, id.pool)
	if err != nil {
		return nil, nil, err
	}
	return d.conns.IOContext(ctx, creds, name, AccessNamespace)
}

// readAccess reads id's access object (an empty one if there is none).
func readAccess(io *rados.IOContext, id volumeID) (access, error) {
	a := access{attach: map[string]attachRecord{}, stage: map[string]stageRecordCeph{}, fence: map[string]fenceRecord{}, journal: map[string]fenceJournalRecord{}}
	m, _, err := readOmap(io, id.image())
	if err != nil {
		return a, backendError(err, "read the access record of volume "+id.String())
	}
	for k, v := range m {
		var err error
		switch {
		case strings.HasPrefix(k, attachKey):
			var r attachRecord
			err = json.Unmarshal(v, &r)
			a.attach[strings.TrimPrefix(k, attachKey)] = r
		case strings.HasPrefix(k, stageKey):
			var r stageRecordCeph
			err = json.Unmarshal(v, &r)
			a.stage[strings.TrimPrefix(k, stageKey)] = r
		case strings.HasPrefix(k, fenceKey):
			var r fenceRecord
			err = json.Unmarshal(v, &r)
			a.fence[strings.TrimPrefix(k, fenceKey)] = r
		case strings.HasPrefix(k, fenceJournalKey):
			var r fenceJournalRecord
			err = json.Unmarshal(v, &r)
			a.journal[strings.TrimPrefix(k, fenceJournalKey)] = r
		}
		if err != nil {
			return a, status.Errorf(codes.Internal, "access record of volume %s, key %q: %v", id, k, err)
		}
	}
	return a, nil
}

// updateAccess sets the keys of set (values JSON-encoded) and removes
// those of drop, in one atomic write (creating the object to set keys; a
// missing object has no keys to drop).
func updateAccess(io *rados.IOContext, id volumeID, set map[string]any, drop ...string) error {
	op := rados.CreateWriteOp()
	defer op.Release()
	if len(set) > 0 {
		vals := make(map[string][]byte, len(set))
		for k, v := range set {
			b, err := json.Marshal(v)
			if err != nil {
				return status.Errorf(codes.Internal, "access record: %v", err)
			}
			vals[k] = b
		}
		op.SetOmap(vals)
	} else {
		op.AssertExists() // nothing to drop from a missing object
	}
	if len(drop) > 0 {
		op.RmOmapKeys(drop)
	}
	if err := op.Operate(io, id.image(), rados.OperationNoFlag); err != nil {
		if len(set) == 0 && errors.Is(err, rados.ErrNotFound) {
			return nil
		}
		return backendError(err, "update the access record of volume "+id.String())
	}
	return nil
}

// removeAccess removes id's access object (DeleteVolume).
func (d *Driver) removeAccess(ctx context.Context, creds Credentials, id volumeID) {
	io, done, err := d.accessIO(ctx, creds, id)
	if err != nil {
		return
	}
	defer done()
	if err := io.Delete(id.image()); err != nil && !errors.Is(err, rados.ErrNotFound) {
		d.opts.Logger.Warn("could not remove the access record of a deleted volume", "volume", id.String(), "error", err)
	}
}

// ControllerPublishVolume records that node may use the volume. RBD
// volumes are single-node: a volume published to another node is
// FailedPrecondition until ControllerUnpublishVolume (which fences that
// node if it still holds the volume) releases it.
//
// With Options.RequireNodeRegistration a node no node plugin registered
// (NodeGetInfo, nodes.go) does not exist: NotFound. Without it the
// driver has no list of nodes and publishes to any node ID (Kubernetes'
// attacher publishes only to nodes whose CSINode names the driver).
func (d *Driver) ControllerPublishVolume(ctx context.Context, r *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	id, ok := parseVolumeID(r.GetVolumeId())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", r.GetVolumeId())
	}
	creds, err := CredentialsFromSecrets(r.GetSecrets())
	if err != nil {
		return nil, err
	}
	c := r.GetVolumeCapability()
	if err := checkCaps([]*csi.VolumeCapability{c}); err != nil {
		return nil, err
	}
	if c.GetBlock() != nil != id.block {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s is a %s volume; the capability asks for %s", id, accessName(id.block), accessName(c.GetBlock() != nil))
	}
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	io, pool, done, err := d.volumeIO(ctx, creds, id.pool)
	if status.Code(err) == codes.NotFound {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", r.GetVolumeId())
	}
	if err != nil {
		return nil, err
	}
	defer done()
	if _, ok, err := imageSize(io, id.image()); err != nil {
		return nil, err
	} else if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", r.GetVolumeId())
	}
	d.remember(creds, pool)
	d.rememberVolume(id, creds)
	node := r.GetNodeId()
	if d.opts.RequireNodeRegistration {
		ok, err := d.nodeRegistered(ctx, creds, node)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, status.Errorf(codes.NotFound, "node %q does not exist: no node plugin of this driver registered it (a node plugin registers its ID at NodeGetInfo, with --secrets-dir, in pool %s)", node, d.opts.DefaultPool)
		}
	}
	aio, adone, err := d.accessIO(ctx, creds, id)
	if err != nil {
		return nil, err
	}
	defer adone()
	a, err := readAccess(aio, id)
	if err != nil {
		return nil, err
	}
	if cur, ok := a.attach[node]; ok {
		if cur.ReadOnly != r.GetReadonly() {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s is already published to node %s with readonly=%v", id, node, cur.ReadOnly)
		}
		return &csi.ControllerPublishVolumeResponse{}, nil
	}
	if others := nodes(a.attach); len(others) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is published to node %s and RBD volumes are single-node: unpublish it there first (ControllerUnpublishVolume fences that node if it still holds the volume)", id, others[0])
	}
	if err := updateAccess(aio, id, map[string]any{attachKey + node: attachRecord{ReadOnly: r.GetReadonly()}}); err != nil {
		return nil, err
	}
	return &csi.ControllerPublishVolumeResponse{}, nil
}

// ControllerUnpublishVolume forgets that node may use the volume (every
// node's publication when the request names none). It does not cut the
// node off: csikit calls Holds and Fence right after it succeeds. A volume
// or pool that does not exist is unpublished already.
func (d *Driver) ControllerUnpublishVolume(ctx context.Context, r *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	id, ok := parseVolumeID(r.GetVolumeId())
	if !ok {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	creds, err := CredentialsFromSecrets(r.GetSecrets())
	if err != nil {
		return nil, err
	}
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	aio, done, err := d.accessIO(ctx, creds, id)
	if status.Code(err) == codes.NotFound {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer done()
	d.rememberVolume(id, creds)
	a, err := readAccess(aio, id)
	if err != nil {
		return nil, err
	}
	var drop []string
	for _, n := range nodes(a.attach) {
		if r.GetNodeId() == "" || n == r.GetNodeId() {
			drop = append(drop, attachKey+n)
		}
	}
	if len(drop) == 0 {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if err := updateAccess(aio, id, nil, drop...); err != nil {
		return nil, err
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}
