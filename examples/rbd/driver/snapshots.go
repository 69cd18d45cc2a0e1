package driver

import (
	"context"
	"errors"
	"strings"

	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/csikit/csikit/journal"
)

// CreateSnapshot takes RBD snapshot csi-snap-<hex> of the source image.
func (d *Driver) CreateSnapshot(ctx context.Context, r *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	rid, ok := journal.ReservedID(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no reserved snapshot ID: build the server with Driver.ServerOptions")
	}
	sid, ok := parseSnapshotID(rid)
	if !ok || sid.vol.String() != r.GetSourceVolumeId() {
		return nil, status.Errorf(codes.Internal, "reserved ID %q is not a snapshot ID of volume %q", rid, r.GetSourceVolumeId())
	}
	creds, err := CredentialsFromSecrets(r.GetSecrets())
	if err != nil {
		return nil, err
	}
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	io, pool, done, err := d.volumeIO(ctx, creds, sid.vol.pool)
	if status.Code(err) == codes.NotFound {
		return nil, status.Errorf(codes.NotFound, "source volume %q does not exist", r.GetSourceVolumeId())
	}
	if err != nil {
		return nil, err
	}
	defer done()
	img, err := rbd.OpenImage(io, sid.vol.image(), rbd.NoSnapshot)
	if errors.Is(err, rbd.ErrNotFound) {
		return nil, status.Errorf(codes.NotFound, "source volume %q does not exist", r.GetSourceVolumeId())
	}
	if err != nil {
		return nil, backendError(err, "open source volume")
	}
	defer img.Close()
	stop := d.holdLease(ctx, creds, pool, journal.KindSnapshot, r.GetName(), rid)
	snap, err := takeSnapshot(img, sid)
	if err := stop(err == nil); err != nil {
		if status.Code(err) == codes.Aborted {
			// Taken over by the sweep (this create stalled past its
			// lease): remove the snapshot rather than answer it.
			_ = img.GetSnapshot(sid.snap()).Remove()
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	d.remember(creds, pool)
	return &csi.CreateSnapshotResponse{Snapshot: snap}, nil
}

// takeSnapshot makes snapshot sid of img unless it exists, and describes it.
func takeSnapshot(img *rbd.Image, sid snapshotID) (*csi.Snapshot, error) {
	if _, err := img.GetSnapID(sid.snap()); cephErrno(err) == 2 {
		if _, err := img.CreateSnapshot(sid.snap()); err != nil && !errors.Is(err, rbd.ErrExist) {
			return nil, backendError(err, "create snapshot")
		}
	} else if err != nil {
		return nil, backendError(err, "look up snapshot")
	}
	return snapshotOf(img, sid)
}

// snapshotOf describes snapshot sid of img.
func snapshotOf(img *rbd.Image, sid snapshotID) (*csi.Snapshot, error) {
	snaps, err := img.GetSnapshotNames()
	if err != nil {
		return nil, backendError(err, "list snapshots")
	}
	for _, s := range snaps {
		if s.Name != sid.snap() {
			continue
		}
		out := &csi.Snapshot{SnapshotId: sid.String(), SourceVolumeId: sid.vol.String(), SizeBytes: int64(s.Size), ReadyToUse: true}
		if ts, err := img.GetSnapTimestamp(s.Id); err == nil {
			out.CreationTime = &timestamppb.Timestamp{Seconds: int64(ts.Sec), Nanos: int32(ts.Nsec)}
		} else {
			out.CreationTime = timestamppb.Now()
		}
		return out, nil
	}
	return nil, status.Errorf(codes.NotFound, "snapshot %s does not exist", sid)
}

// DeleteSnapshot removes the RBD snapshot (clone v2 keeps it in the trash
// while restored volumes still need it) and then the hidden image of a
// deleted volume that no longer has snapshots.
func (d *Driver) DeleteSnapshot(ctx context.Context, r *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	sid, ok := parseSnapshotID(r.GetSnapshotId())
	if !ok {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	creds, err := CredentialsFromSecrets(r.GetSecrets())
	if err != nil {
		return nil, err
	}
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	io, _, done, err := d.volumeIO(ctx, creds, sid.vol.pool)
	if status.Code(err) == codes.NotFound {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer done()
	img, err := findSnapshotImage(io, sid)
	if err != nil || img == nil {
		return &csi.DeleteSnapshotResponse{}, err
	}
	name := img.GetName()
	err = img.GetSnapshot(sid.snap()).Remove()
	_ = img.Close()
	if err != nil && !errors.Is(err, rbd.ErrNotFound) && cephErrno(err) != 2 {
		return nil, backendError(err, "remove snapshot")
	}
	if strings.HasPrefix(name, deletedPrefix) {
		d.reap(io, name)
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// ListSnapshots lists the CSI snapshots of the pools this driver served
// (or of the filtered snapshot or volume), ordered by ID; the token is the
// ID to continue from.
func (d *Driver) ListSnapshots(ctx context.Context, r *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	tok := r.GetStartingToken()
	if tok != "" {
		if _, ok := parseSnapshotID(tok); !ok {
			return nil, status.Errorf(codes.Aborted, "starting_token %q was not returned by ListSnapshots", tok)
		}
	}
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	var all []*csi.Snapshot
	wantSnap, wantVol := r.GetSnapshotId(), r.GetSourceVolumeId()
	var onlyImage string
	onlyPool := int64(-1)
	if wantSnap != "" {
		s, ok := parseSnapshotID(wantSnap)
		if !ok {
			return &csi.ListSnapshotsResponse{}, nil
		}
		onlyImage, onlyPool = s.vol.hex, s.vol.pool
	}
	if wantVol != "" {
		v, ok := parseVolumeID(wantVol)
		if !ok || (onlyImage != "" && (onlyImage != v.hex || onlyPool != v.pool)) {
			return &csi.ListSnapshotsResponse{}, nil
		}
		onlyImage, onlyPool = v.hex, v.pool
	}
	pools, err := d.listPools(ctx, r.GetSecrets())
	if err != nil {
		return nil, err
	}
	if onlyPool >= 0 {
		// The ID names its pool: list that one, served before or not
		// (after a restart nothing is), with the request's credentials
		// or else those of any pool served.
		var creds Credentials
		switch {
		case len(r.GetSecrets()) > 0:
			creds, err = CredentialsFromSecrets(r.GetSecrets())
			if err != nil {
				return nil, err
			}
		case len(pools) > 0:
			creds = pools[0].creds
		default:
			return &csi.ListSnapshotsResponse{}, nil // no credentials to look with
		}
		name, err := d.poolName(ctx, creds, onlyPool)
		if status.Code(err) == codes.NotFound {
			return &csi.ListSnapshotsResponse{}, nil
		}
		if err != nil {
			return nil, err
		}
		pools = []seenPool{{creds: creds, pool: name}}
	}
	for _, p := range pools {
		io, done, err := d.conns.IOContext(ctx, p.creds, p.pool, "")
		if d.skipPool(err, p.pool) && onlyPool < 0 {
			continue
		}
		if err != nil {
			return nil, err
		}
		poolID := io.GetPoolID()
		names, err := rbd.GetImageNames(io)
		if err != nil {
			done()
			err = backendError(err, "list images of pool "+p.pool)
			if onlyPool < 0 && d.skipPool(err, p.pool) {
				continue
			}
			return nil, err
		}
		for _, n := range names {
			local, ok := strings.CutPrefix(n, imagePrefix)
			if !ok {
				local, ok = strings.CutPrefix(n, deletedPrefix)
			}
			vol, ok2 := parseLocal(poolID, local)
			if !ok || !ok2 || (onlyImage != "" && vol.hex != onlyImage) {
				continue
			}
			img, err := rbd.OpenImageReadOnly(io, n, rbd.NoSnapshot)
			if err != nil {
				continue // removed meanwhile
			}
			snaps, _ := img.GetSnapshotNames()
			for _, s := range snaps {
				sh, ok := strings.CutPrefix(s.Name, snapPrefix)
				if !ok || !isHex32(sh) {
					continue
				}
				sid := snapshotID{vol: vol, hex: sh}
				if wantSnap != "" && sid.String() != wantSnap {
					continue
				}
				if snap, err := snapshotOf(img, sid); err == nil {
					all = append(all, snap)
				}
			}
			_ = img.Close()
		}
		done()
	}
	sortBy(all, func(s *csi.Snapshot) string { return s.GetSnapshotId() })
	page, next := paginate(all, func(s *csi.Snapshot) string { return s.GetSnapshotId() }, tok, r.GetMaxEntries())
	out := &csi.ListSnapshotsResponse{NextToken: next}
	for _, s := range page {
		out.Entries = append(out.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: s})
	}
	return out, nil
}
