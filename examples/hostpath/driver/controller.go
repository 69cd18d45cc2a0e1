//go:build linux

package driver

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csikit/csikit/capacity"
	"github.com/csikit/csikit/csi/validation"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/k8s/keys"
	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/quota"
	"github.com/csikit/csikit/topology"
)

// defaultVolumeSize is used when CreateVolume names no capacity.
const defaultVolumeSize = 1 << 30

// CreateVolume creates the volume under the journal's reserved ID.
func (d *Driver) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	id, ok := journal.ReservedID(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no reserved volume ID: the server was built without the driver's journal")
	}
	k, fsType, err := volumeKind(r.GetVolumeCapabilities(), r.GetParameters())
	if err != nil {
		return nil, err
	}
	size, err := d.capacityFor(r.GetCapacityRange())
	if err != nil {
		return nil, err
	}
	if k == kindFS {
		if size, err = d.fitFileSystem(ctx, fsType, size, r.GetCapacityRange().GetLimitBytes()); err != nil {
			return nil, err
		}
	}
	if err := d.checkTopology(r.GetAccessibilityRequirements()); err != nil {
		return nil, err
	}
	// A retry after the journal's commit failed, or after a crash between
	// the commit and the answer, finds the volume durable: answer it. The
	// store holds nothing that is not durable, so a retry after a failed
	// commit creates (and writes) the volume again.
	if v, ok := d.store.volume(id); ok {
		return &csi.CreateVolumeResponse{Volume: d.csiVolume(&v, r.GetVolumeContentSource())}, nil
	}
	// An empty directory volume's directory is made at its first stage
	// (Lazy): a volume created and deleted unused, as provisioning churn
	// and tests do, then touches no directory.
	v := &volume{ID: id, Name: r.GetName(), Capacity: size, Kind: k, FSType: fsType,
		Params: keys.StripReserved(r.GetParameters()), Created: time.Now().UTC(), Lazy: k == kindDir}
	if err := d.checkMutable(r.GetMutableParameters()); err != nil {
		return nil, err
	}
	for key, val := range r.GetMutableParameters() {
		if v.Params == nil {
			v.Params = map[string]string{}
		}
		v.Params[key] = val
	}

	src := r.GetVolumeContentSource()
	// An earlier attempt under this ID (a reservation it did not make)
	// may have left data; a fresh reservation of a random ID cannot have.
	if !journal.ReservedFresh(ctx) {
		if err := d.removeLeftovers(ctx, id); err != nil {
			return nil, err
		}
	}
	if err := d.reserveCapacity(id, v.imageSize(size)); err != nil {
		return nil, err
	}
	d.step("volume:reserved")
	if err := d.createData(ctx, v, src); err != nil {
		d.discardData(v)
		d.ledger.cancel(id)
		return nil, err
	}
	d.step("volume:data-made")
	// Deferred into the journal's commit: durable with it, or the call
	// fails Unavailable and the retry comes back here.
	if err := d.store.putVolume(ctx, v); err != nil {
		d.discardData(v)
		d.ledger.cancel(id)
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.ledger.commit(id)
	d.step("volume:recorded")
	return &csi.CreateVolumeResponse{Volume: d.csiVolume(v, src)}, nil
}

// volumeKind derives how a volume stores its data from its capabilities
// and parameters.
func volumeKind(caps []*csi.VolumeCapability, params map[string]string) (kind, string, error) {
	var block, mnt bool
	for _, c := range caps {
		if c.GetBlock() != nil {
			block = true
		}
		if c.GetMount() != nil {
			mnt = true
		}
	}
	if block && mnt {
		return "", "", status.Error(codes.InvalidArgument, "a volume is either block or mount: got both access types")
	}
	fsType := params[ParamFSType]
	if fsType == "" {
		for _, c := range caps {
			if t := c.GetMount().GetFsType(); t != "" {
				fsType = t
			}
		}
	}
	switch params[ParamEncrypted] {
	case "", "false":
	case "true":
		if !block && (params[ParamKind] == string(kindDir) || fsType == "") {
			return "", "", status.Errorf(codes.InvalidArgument,
				"%s: \"true\" needs a filesystem (fsType ext4 or xfs) or block volume: a directory volume cannot be encrypted", ParamEncrypted)
		}
	default:
		return "", "", status.Errorf(codes.InvalidArgument, "%s: %q, want \"true\" or \"false\"", ParamEncrypted, params[ParamEncrypted])
	}
	switch {
	case block:
		return kindBlock, "", nil
	case params[ParamKind] == string(kindDir) || fsType == "":
		return kindDir, "", nil
	case fsType == "ext4" || fsType == "xfs":
		return kindFS, fsType, nil
	}
	return "", "", status.Errorf(codes.InvalidArgument, "fsType %q is not supported: want ext4 or xfs (or none for a directory)", fsType)
}

// capacityFor picks the volume size for a capacity range (capacity.Size):
// the requirement, else defaultVolumeSize within the limit, at most
// MaxVolumeSize.
func (d *Driver) capacityFor(cr *csi.CapacityRange) (int64, error) {
	return capacity.Size(cr, d.sizes())
}

// sizes are the volume sizes this driver makes, for package capacity.
func (d *Driver) sizes() capacity.Options {
	return capacity.Options{Default: defaultVolumeSize, Max: d.opts.MaxVolumeSize}
}

// fitFileSystem rounds size up to the smallest device this node's
// mkfs.<fsType> formats (mount.Mounter.MinSize), within the capacity
// range's limit: a volume too small for its file system is refused here,
// OutOfRange naming the minimum, not at NodeStageVolume.
func (d *Driver) fitFileSystem(ctx context.Context, fsType string, size, limit int64) (int64, error) {
	min, err := d.mounter.MinSize(ctx, fsType)
	if err != nil {
		return 0, err
	}
	if size, err = mount.FitSize(fsType, size, limit, min); err != nil {
		return 0, err
	}
	if size > d.opts.MaxVolumeSize {
		return 0, status.Errorf(codes.OutOfRange, "a %s volume needs at least %d bytes, more than the maximum volume size of %d bytes", fsType, size, d.opts.MaxVolumeSize)
	}
	return size, nil
}

// checkTopology refuses requirements this node cannot meet, by the spec's
// preferred/requisite rules (topology.Select; ResourceExhausted when the
// node is outside every requisite term).
func (d *Driver) checkTopology(req *csi.TopologyRequirement) error {
	if req == nil {
		return nil
	}
	_, err := topology.Select(req, []*csi.Topology{d.nodeTopology()}, 1)
	return err
}

// nodeTopology is the one segment this driver serves.
func (d *Driver) nodeTopology() *csi.Topology {
	return &csi.Topology{Segments: map[string]string{TopologyKey: d.opts.NodeID}}
}

// csiVolume is the CSI view of v.
func (d *Driver) csiVolume(v *volume, src *csi.VolumeContentSource) *csi.Volume {
	out := &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.Capacity,
		VolumeContext:      map[string]string{"kind": string(v.Kind)},
		ContentSource:      src,
		AccessibleTopology: []*csi.Topology{d.nodeTopology()},
	}
	if v.FSType != "" {
		out.VolumeContext[ParamFSType] = v.FSType
	}
	return out
}

// DeleteVolume deletes the volume; deleting an unknown one succeeds.
func (d *Driver) DeleteVolume(ctx context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := r.GetVolumeId()
	if !validID(id) {
		return &csi.DeleteVolumeResponse{}, nil // no such volume can exist
	}
	v, ok := d.store.volume(id)
	if !ok {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if v.AttachedTo != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still published to node %s", id, v.AttachedTo)
	}
	if len(v.Published) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still published on node %s: unpublish it first", id, d.opts.NodeID)
	}
	// A Lazy volume was never staged (its first stage makes it not
	// Lazy): no marker to look for.
	if !v.Lazy {
		if _, err := os.Stat(d.stagedMarker(id)); err == nil {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is still staged on node %s: unstage it first", id, d.opts.NodeID)
		}
	}
	if err := d.detachIfAttached(ctx, &v); err != nil {
		return nil, err
	}
	// Data first: when it cannot be removed (a mount below it), the
	// volume stays known and the CO's retry tries again. The record's
	// delete is deferred into the journal's release: until that is durable
	// the volume stays listed and charged, and a retry deletes again.
	if err := d.removeData(ctx, &v); err != nil {
		return nil, err
	}
	d.step("volume:data-removed")
	if err := d.store.delVolume(ctx, id); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.ledger.release(id)
	return &csi.DeleteVolumeResponse{}, nil
}

// lookup returns the volume or NotFound.
func (d *Driver) lookup(id string) (volume, error) {
	if validID(id) {
		if v, ok := d.store.volume(id); ok {
			return v, nil
		}
	}
	return volume{}, status.Errorf(codes.NotFound, "volume %q does not exist", id)
}

// ValidateVolumeCapabilities confirms capabilities the volume can serve.
func (d *Driver) ValidateVolumeCapabilities(ctx context.Context, r *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	for _, c := range r.GetVolumeCapabilities() {
		if (c.GetBlock() != nil) != (v.Kind == kindBlock) {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: "access type does not match the volume's (" + string(v.Kind) + ")"}, nil
		}
	}
	return validation.Confirm(r, &validation.Config{AccessTypes: validation.Mount | validation.Block, AccessModes: accessModes}), nil
}

// accessModes are the modes a single-node driver serves.
var accessModes = []csi.VolumeCapability_AccessMode_Mode{
	csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
}

// AccessModes returns the access modes the driver serves, for
// csikit.Options.
func AccessModes() []csi.VolumeCapability_AccessMode_Mode { return slices.Clone(accessModes) }

// ListVolumes pages through volumes in ID order. A token is the last ID of
// the previous page, encoded; a token that does not decode is Aborted.
func (d *Driver) ListVolumes(ctx context.Context, r *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	after, err := decodeToken(r.GetStartingToken())
	if err != nil {
		return nil, err
	}
	resp := &csi.ListVolumesResponse{}
	limit := int(r.GetMaxEntries())
	// What the entries have in common (the topology, a few volume
	// contexts) is made once and shared, and the entries' messages are
	// allocated a block at a time: a page of 500 made some 4,000 small
	// allocations, which the garbage collector then had to catch up with.
	topology := []*csi.Topology{d.nodeTopology()}
	contexts := map[[2]string]map[string]string{}
	var block []listBlock
	if limit > 0 {
		resp.Entries = make([]*csi.ListVolumesResponse_Entry, 0, min(limit, 1000))
	}
	err = eachAfterAs(d.store.volumes, after, func(id string, l *volumeListing) bool {
		if limit > 0 && len(resp.Entries) == limit {
			resp.NextToken = encodeToken(resp.Entries[len(resp.Entries)-1].GetVolume().GetVolumeId())
			return false
		}
		if len(block) == 0 {
			n := 64
			if limit > 0 {
				n = min(n, limit-len(resp.Entries))
			}
			block = make([]listBlock, n)
		}
		b := &block[0]
		block = block[1:]
		ctx, ok := contexts[[2]string{string(l.Kind), l.FSType}]
		if !ok {
			ctx = d.csiVolume(&volume{Kind: l.Kind, FSType: l.FSType}, nil).VolumeContext
			contexts[[2]string{string(l.Kind), l.FSType}] = ctx
		}
		// l.ID is the key's string, or a copy for a record whose ID
		// differs from its key (none should).
		b.volume.VolumeId, b.volume.CapacityBytes = l.ID, l.Capacity
		b.volume.VolumeContext, b.volume.AccessibleTopology = ctx, topology
		b.entry.Volume, b.entry.Status = &b.volume, &b.status
		if l.AttachedTo != "" {
			b.status.PublishedNodeIds = []string{l.AttachedTo}
		}
		resp.Entries = append(resp.Entries, &b.entry)
		return true
	})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "list volumes: %v", err)
	}
	return resp, nil
}

// listBlock is the messages of one ListVolumes entry, allocated together.
type listBlock struct {
	entry  csi.ListVolumesResponse_Entry
	volume csi.Volume
	status csi.ListVolumesResponse_VolumeStatus
}

const tokenPrefix = "hp1."

func encodeToken(lastID string) string {
	return tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(lastID))
}

func decodeToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, tokenPrefix))
	if err != nil || !strings.HasPrefix(tok, tokenPrefix) || !validID(string(raw)) {
		return "", status.Error(codes.Aborted, "starting_token is not one this driver issued: start listing again without it")
	}
	return string(raw), nil
}

// GetCapacity reports the capacity left, for this node's topology only.
func (d *Driver) GetCapacity(ctx context.Context, r *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	if t := r.GetAccessibleTopology(); t != nil {
		if n, ok := t.GetSegments()[TopologyKey]; ok && n != d.opts.NodeID {
			return &csi.GetCapacityResponse{}, nil
		}
	}
	avail := d.available()
	return &csi.GetCapacityResponse{
		AvailableCapacity: avail,
		MaximumVolumeSize: wrapperspb.Int64(min(d.opts.MaxVolumeSize, max(avail, 0))),
	}, nil
}

// ControllerGetVolume returns the volume and where it is published.
func (d *Driver) ControllerGetVolume(ctx context.Context, r *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	st := &csi.ControllerGetVolumeResponse_VolumeStatus{}
	if v.AttachedTo != "" {
		st.PublishedNodeIds = []string{v.AttachedTo}
	}
	return &csi.ControllerGetVolumeResponse{Volume: d.csiVolume(&v, nil), Status: st}, nil
}

// ControllerExpandVolume grows the volume; filesystem and block volumes
// grow their backing file and ask for the node step.
func (d *Driver) ControllerExpandVolume(ctx context.Context, r *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	size, err := capacity.Expand(r.GetCapacityRange(), v.Capacity, d.sizes())
	if err != nil {
		return nil, err
	}
	nodeStep := v.Kind != kindDir
	if size <= v.Capacity {
		return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.Capacity, NodeExpansionRequired: nodeStep}, nil
	}
	if err := d.reserveCapacity(v.ID, v.imageSize(size)); err != nil {
		return nil, err
	}
	if v.Kind != kindDir {
		if err := os.Truncate(d.volumeImage(v.ID), v.imageSize(size)); err != nil {
			d.ledger.cancel(v.ID)
			return nil, status.Errorf(codes.Internal, "grow backing file: %v", err)
		}
		if _, err := os.Stat(d.stagedMarker(v.ID)); v.Kind == kindFS && errNotExist(err) {
			if res, err := d.growExt4Offline(ctx, d.volumeImage(v.ID)); err != nil {
				d.shrinkBackAfterFailedGrow(&v, res)
				d.ledger.cancel(v.ID)
				return nil, err
			}
		}
	} else if v.ProjectID != 0 {
		if err := quota.SetLimit(ctx, d.volumeDir(v.ID), quota.ProjectID(v.ProjectID), size); err != nil {
			d.ledger.cancel(v.ID)
			return nil, status.Errorf(status.Code(err), "raise the quota of volume %s: %v", v.ID, err)
		}
	}
	old := v.Capacity
	v.Capacity = size
	if err := d.store.putVolume(ctx, &v); err != nil {
		if v.ProjectID != 0 { // the record still says old: so must the limit
			if qerr := quota.SetLimit(ctx, d.volumeDir(v.ID), quota.ProjectID(v.ProjectID), old); qerr != nil {
				d.log.Warn("could not lower the quota of a volume whose expansion failed", "volume", v.ID, "error", qerr)
			}
		}
		d.ledger.cancel(v.ID)
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.ledger.commit(v.ID)
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: size, NodeExpansionRequired: nodeStep}, nil
}

// errNotExist reports a missing file or directory.
func errNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
