package driver

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/ceph/go-ceph/rados"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
)

// Which nodes exist, for the driver: those whose node plugin answered
// NodeGetInfo. That answer is how a CO learns a node ID (kubelet writes
// it into the node's CSINode; csi-sanity asks for it), so a node plugin
// with standing credentials (Options.SecretsDir) registers its ID then,
// as key node/<ID> of object NodesObject in namespace AccessNamespace of
// its default pool, before it answers. With
// Options.RequireNodeRegistration a controller publishes only to
// registered nodes and answers any other node ID NOT_FOUND, as the CSI
// spec asks of a node that does not exist. A registration is never
// removed by the driver: a node plugin restarts, its node stays; a
// deleted node's record only lets a publish to it succeed, which no CO
// asks for.
const NodesObject = "csikit.nodes"

const nodeKey = "node/"

// nodeRecord is a node/<ID> value.
type nodeRecord struct {
	Zone       string    `json:"zone,omitempty"`
	Registered time.Time `json:"registered"`
}

var _ csikit.NodeInfoer = (*Driver)(nil)

// NodeGetInfo answers with the node's ID and zone (csikit.NodeInfoer),
// after registering the node when the plugin has standing credentials
// (Options.SecretsDir). A registration that fails is Unavailable, so the
// CO (kubelet's plugin registration) retries: a node is not announced
// before a controller can find it.
func (d *Driver) NodeGetInfo(ctx context.Context, _ *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	resp := &csi.NodeGetInfoResponse{NodeId: d.opts.NodeID}
	if d.opts.Zone != "" {
		resp.AccessibleTopology = &csi.Topology{Segments: map[string]string{TopologyKey: d.opts.Zone}}
	}
	creds, ok, err := d.standing()
	if err != nil {
		return nil, err
	}
	if !ok || d.opts.NodeID == "" {
		return resp, nil
	}
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	io, done, err := d.conns.IOContext(ctx, creds, d.opts.DefaultPool, AccessNamespace)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "register node %s in pool %s: %v", d.opts.NodeID, d.opts.DefaultPool, err)
	}
	defer done()
	b, err := json.Marshal(nodeRecord{Zone: d.opts.Zone, Registered: time.Now()})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "node record: %v", err)
	}
	op := rados.CreateWriteOp()
	defer op.Release()
	op.SetOmap(map[string][]byte{nodeKey + d.opts.NodeID: b})
	if err := op.Operate(io, NodesObject, rados.OperationNoFlag); err != nil {
		return nil, status.Errorf(codes.Unavailable, "register node %s in pool %s: %v", d.opts.NodeID, d.opts.DefaultPool, backendError(err, "write "+NodesObject))
	}
	return resp, nil
}

// nodeRegistered reports whether a node plugin registered node in the
// default pool.
func (d *Driver) nodeRegistered(ctx context.Context, creds Credentials, node string) (bool, error) {
	io, done, err := d.conns.IOContext(ctx, creds, d.opts.DefaultPool, AccessNamespace)
	if status.Code(err) == codes.NotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer done()
	op := rados.CreateReadOp()
	defer op.Release()
	step := op.GetOmapValuesByKeys([]string{nodeKey + node})
	if err := op.Operate(io, NodesObject, rados.OperationNoFlag); err != nil {
		if errors.Is(err, rados.ErrNotFound) {
			return false, nil
		}
		return false, backendError(err, "read the node registrations ("+NodesObject+" in pool "+d.opts.DefaultPool+")")
	}
	kv, err := step.Next()
	if err != nil {
		return false, backendError(err, "read the node registrations")
	}
	return kv != nil, nil
}
