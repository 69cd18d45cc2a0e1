//go:build linux

package driver

import (
	"context"
	"reflect"
	"slices"

	"github.com/csikit/csikit"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ControllerPublishVolume records the volume as attached to the node,
// within the node's attach limit.
//
// Served only with Options.EnableAttach (see Disabled).
func (d *Driver) ControllerPublishVolume(ctx context.Context, r *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if r.GetNodeId() != d.opts.NodeID {
		return nil, status.Errorf(codes.NotFound, "node %q does not exist: this driver serves node %q", r.GetNodeId(), d.opts.NodeID)
	}
	if c := r.GetVolumeCapability(); (c.GetBlock() != nil) != (v.Kind == kindBlock) {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s is a %s volume: the capability's access type does not match", v.ID, v.Kind)
	}
	ro := r.GetReadonly()
	if v.AttachedTo == r.GetNodeId() {
		if v.AttachedRO != ro {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s is already published to node %s with readonly=%v", v.ID, v.AttachedTo, v.AttachedRO)
		}
		return &csi.ControllerPublishVolumeResponse{}, nil
	}
	if v.AttachedTo != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is published to node %s; it is single-node", v.ID, v.AttachedTo)
	}
	d.capMu.Lock() // the attach limit is a count across volumes
	defer d.capMu.Unlock()
	if limit := d.opts.MaxVolumesPerNode; limit > 0 && d.attachedCount() >= limit {
		return nil, status.Errorf(codes.ResourceExhausted, "node %s already has its maximum of %d volumes attached", r.GetNodeId(), limit)
	}
	v.AttachedTo, v.AttachedRO = r.GetNodeId(), ro
	if err := d.store.putVolume(ctx, &v); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.ControllerPublishVolumeResponse{}, nil
}

func (d *Driver) attachedCount() int64 {
	// Kept by the ledger's watch of the durable records: the same at any
	// number of volumes. Publishes write durably under capMu, so the
	// count includes every publish before this one.
	return d.ledger.attached.Load()
}

// ControllerUnpublishVolume clears the attachment; it is idempotent. A
// volume or node that does not exist is, as the spec allows, regarded as
// unpublished already.
func (d *Driver) ControllerUnpublishVolume(ctx context.Context, r *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if n := r.GetNodeId(); v.AttachedTo == "" || (n != "" && n != v.AttachedTo) {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	v.AttachedTo, v.AttachedRO = "", false
	if err := d.store.putVolume(ctx, &v); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// ControllerModifyVolume stores the new values of mutable parameters.
// Served only with Options.EnableModify (see Disabled).
func (d *Driver) ControllerModifyVolume(ctx context.Context, r *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := d.checkMutable(r.GetMutableParameters()); err != nil {
		return nil, err
	}
	if v.Params == nil {
		v.Params = map[string]string{}
	}
	for k, val := range r.GetMutableParameters() {
		v.Params[k] = val
	}
	if err := d.store.putVolume(ctx, &v); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.ControllerModifyVolumeResponse{}, nil
}

// checkMutable refuses parameters that are not mutable (in
// ControllerModifyVolume, and in CreateVolume's volume attribute class).
func (d *Driver) checkMutable(params map[string]string) error {
	if len(params) > 0 && !d.opts.EnableModify {
		return status.Error(codes.InvalidArgument, "mutable parameters given, but volume modification is not enabled (--enable-modify)")
	}
	for k := range params {
		if len(d.opts.MutableParameters) > 0 && !slices.Contains(d.opts.MutableParameters, k) {
			return status.Errorf(codes.InvalidArgument, "parameter %q is not mutable: mutable parameters are %v", k, d.opts.MutableParameters)
		}
	}
	return nil
}

// Disabled lists the csikit driver interfaces *Driver implements but these
// options switch off, for csikit.Options.Disable: ControllerPublisher
// without EnableAttach, Modifier without EnableModify. One driver type
// serves every combination of the flags.
func (o Options) Disabled() []reflect.Type {
	var off []reflect.Type
	if !o.EnableAttach {
		off = append(off, reflect.TypeFor[csikit.ControllerPublisher]())
	}
	if !o.EnableModify {
		off = append(off, reflect.TypeFor[csikit.Modifier]())
	}
	return off
}
