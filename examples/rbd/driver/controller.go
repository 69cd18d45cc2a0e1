package driver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/ceph/go-ceph/rados"
	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/capacity"
	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/mount"
)

const (
	defaultVolumeSize = 1 << 30
	sizeAlign         = 1 << 20 // images are whole MiB: loop and krbd devices like that
)

func wantsBlock(caps []*csi.VolumeCapability) bool {
	for _, c := range caps {
		if c.GetBlock() != nil {
			return true
		}
	}
	return false
}

// checkSourceAccess refuses a source whose access type differs from the
// request's (recorded in both IDs).
func checkSourceAccess(srcBlock, block bool, what string) error {
	if srcBlock != block {
		return status.Errorf(codes.InvalidArgument, "%s is a %s volume; the request asks for %s", what, accessName(srcBlock), accessName(block))
	}
	return nil
}

func accessName(block bool) string {
	if block {
		return "block"
	}
	return "mount"
}

// volumeIO opens the pool of v with creds and returns its name too.
func (d *Driver) volumeIO(ctx context.Context, creds Credentials, pool int64) (*rados.IOContext, string, func(), error) {
	name, err := d.poolName(ctx, creds, pool)
	if err != nil {
		return nil, "", nil, err
	}
	io, done, err := d.conns.IOContext(ctx, creds, name, "")
	if err != nil {
		return nil, "", nil, err
	}
	return io, name, done, nil
}

// sizeFor picks the image size for a capacity range (capacity.Size): whole
// MiB, at least minSize (a clone's source), minSize or else
// defaultVolumeSize when the range sets no requirement, at most
// MaxVolumeSize.
func (d *Driver) sizeFor(cr *csi.CapacityRange, minSize int64) (int64, error) {
	def := int64(defaultVolumeSize)
	if minSize > 0 {
		def = minSize
	}
	return capacity.Size(cr, capacity.Options{Default: def, Min: minSize, Max: d.opts.MaxVolumeSize, Granularity: sizeAlign})
}

// featureNeeds are the features each optional feature needs (librbd's
// rules): a combination without them is refused before anything is made.
var featureNeeds = map[string][]string{
	rbd.FeatureNameObjectMap:  {rbd.FeatureNameExclusiveLock},
	rbd.FeatureNameFastDiff:   {rbd.FeatureNameObjectMap},
	rbd.FeatureNameJournaling: {rbd.FeatureNameExclusiveLock},
}

// imageFeatures parses ParamImageFeatures (default DefaultImageFeatures):
// known names only, layering always added, and every feature's
// dependencies present (InvalidArgument saying which to add).
func imageFeatures(params map[string]string) ([]string, error) {
	f := params[ParamImageFeatures]
	if f == "" {
		f = DefaultImageFeatures
	}
	var names []string
	for _, n := range strings.Split(f, ",") {
		n = strings.TrimSpace(n)
		switch n {
		case rbd.FeatureNameLayering, rbd.FeatureNameExclusiveLock, rbd.FeatureNameObjectMap,
			rbd.FeatureNameFastDiff, rbd.FeatureNameDeepFlatten, rbd.FeatureNameJournaling:
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		case "":
		default:
			return nil, status.Errorf(codes.InvalidArgument, "parameter %q: unknown image feature %q; want a comma list of layering, exclusive-lock, object-map, fast-diff, deep-flatten, journaling", ParamImageFeatures, n)
		}
	}
	if !slices.Contains(names, rbd.FeatureNameLayering) {
		names = append(names, rbd.FeatureNameLayering) // snapshots restore by cloning
	}
	for _, n := range names {
		for _, need := range featureNeeds[n] {
			if !slices.Contains(names, need) {
				return nil, status.Errorf(codes.InvalidArgument, "parameter %q = %q: image feature %s needs %s; add it, or remove %s", ParamImageFeatures, f, n, need, n)
			}
		}
	}
	return names, nil
}

// imageOptions builds librbd options from the StorageClass parameters,
// already checked by checkImageParams.
func imageOptions(params map[string]string) (*rbd.ImageOptions, error) {
	names, err := imageFeatures(params)
	if err != nil {
		return nil, err
	}
	o := rbd.NewRbdImageOptions()
	fs := rbd.FeatureSetFromNames(names)
	if err := o.SetUint64(rbd.ImageOptionFeatures, uint64(fs)); err != nil {
		o.Destroy()
		return nil, status.Errorf(codes.Internal, "image options: %v", err)
	}
	if dp := params[ParamDataPool]; dp != "" {
		if err := o.SetString(rbd.ImageOptionDataPool, dp); err != nil {
			o.Destroy()
			return nil, status.Errorf(codes.Internal, "image options: %v", err)
		}
	}
	return o, nil
}

// checkImageParams refuses, before anything is made, image parameters
// librbd would refuse: bad feature combinations and a data pool that does
// not exist (for the request's user).
func (d *Driver) checkImageParams(ctx context.Context, creds Credentials, params map[string]string) error {
	if _, err := imageFeatures(params); err != nil {
		return err
	}
	if dp, ok := params[ParamDataPool]; ok {
		if dp == "" {
			return status.Errorf(codes.InvalidArgument, "parameter %q is empty: name an existing Ceph pool or remove the parameter", ParamDataPool)
		}
		if _, err := d.poolID(ctx, creds, dp); err != nil {
			if status.Code(err) == codes.InvalidArgument {
				return status.Errorf(codes.InvalidArgument, "Ceph data pool %q (parameter %q) does not exist: create it (ceph osd pool create; for an erasure-coded pool also allow_ec_overwrites) or fix the StorageClass", dp, ParamDataPool)
			}
			return err
		}
	}
	return nil
}

// createError maps a failed image create: librbd answers EINVAL for
// options it refuses and ENOENT for a data pool it cannot use, which are
// the StorageClass's to fix (InvalidArgument).
func createError(err error, what string, params map[string]string) error {
	switch cephErrno(err) {
	case 22: // EINVAL
		return status.Errorf(codes.InvalidArgument, "%s: librbd refused the image options (imageFeatures %q, dataPool %q): %v; fix the StorageClass parameters", what, params[ParamImageFeatures], params[ParamDataPool], err)
	case 2: // ENOENT
		if params[ParamDataPool] != "" {
			return status.Errorf(codes.InvalidArgument, "%s: data pool %q (parameter %q) is missing or unusable: %v", what, params[ParamDataPool], ParamDataPool, err)
		}
	}
	return backendError(err, what)
}

// CreateVolume makes image csi-vol-<hex> for the reserved ID: blank, a
// clone of a snapshot, or a clone of a volume.
func (d *Driver) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	rid, ok := journal.ReservedID(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no reserved volume ID: build the server with Driver.ServerOptions")
	}
	id, ok := parseVolumeID(rid)
	if !ok {
		return nil, status.Errorf(codes.Internal, "reserved ID %q is not a volume ID of this driver", rid)
	}
	creds, err := CredentialsFromSecrets(r.GetSecrets())
	if err != nil {
		return nil, err
	}
	if err := checkCaps(r.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	_, zone, err := d.choosePool(r)
	if err != nil {
		return nil, err
	}
	if _, ok := d.mappers[r.GetParameters()[ParamMapper]]; !ok && r.GetParameters()[ParamMapper] != "" {
		return nil, status.Errorf(codes.InvalidArgument, "parameter %q: want krbd, rbd-nbd or rbd-fuse", ParamMapper)
	}
	fsType, set := r.GetParameters()[ParamFsType]
	if set && !supportedFS(fsType) {
		return nil, status.Errorf(codes.InvalidArgument, "parameter %q = %q: want %s", ParamFsType, fsType, fsNames)
	}
	for _, c := range r.GetVolumeCapabilities() {
		if t := c.GetMount().GetFsType(); t != "" && !supportedFS(t) {
			return nil, status.Errorf(codes.InvalidArgument, "fs_type %q is not supported: want %s", t, fsNames)
		}
	}
	encrypted, err := checkEncrypted(r.GetParameters())
	if err != nil {
		return nil, err
	}
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	if err := d.checkImageParams(ctx, creds, r.GetParameters()); err != nil {
		return nil, err
	}
	io, pool, done, err := d.volumeIO(ctx, creds, id.pool)
	if err != nil {
		return nil, err
	}
	defer done()
	opts, err := imageOptions(r.GetParameters())
	if err != nil {
		return nil, err
	}
	defer opts.Destroy()

	// The reservation is this call's while it runs: the sweep of
	// abandoned creates cannot take it over.
	stop := d.holdLease(ctx, creds, pool, journal.KindVolume, r.GetName(), rid)
	src := r.GetVolumeContentSource()
	var size int64
	if src == nil {
		var fs string
		var fsMin int64
		if fs, fsMin, err = d.fsMinimum(ctx, fsType, r.GetVolumeCapabilities()); err == nil {
			if encrypted && fsMin > 0 {
				fsMin += crypt.HeaderBytes // the file system is on the mapping
			}
			size, err = d.createBlank(io, id, r.GetCapacityRange(), fs, fsMin, opts, r.GetParameters())
		}
	} else {
		size, err = d.createClone(ctx, creds, io, id, src, r, opts)
	}
	if err := stop(err == nil); err != nil {
		if status.Code(err) == codes.Aborted {
			// Taken over (this create stalled past its lease): what it
			// made is the sweep's to remove, and it may have removed it
			// already; remove it too rather than answer it.
			_ = rbd.RemoveImage(io, id.image())
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	d.remember(creds, pool)
	if lim := r.GetCapacityRange().GetLimitBytes(); lim > 0 && size > lim {
		return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with %d bytes, more than the limit of %d", id, size, lim)
	}
	if req := r.GetCapacityRange().GetRequiredBytes(); size < req {
		return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with %d bytes, less than the required %d", id, size, req)
	}
	// Recorded before the create is committed (a retry records it
	// again): ListVolumes reports it without reading the image header.
	if err := d.recordSize(ctx, creds, pool, id.image(), size); err != nil {
		return nil, err
	}
	vol := &csi.Volume{
		VolumeId: id.String(), CapacityBytes: size, ContentSource: src,
		VolumeContext: map[string]string{"pool": pool, "imageName": id.image()},
	}
	if m := r.GetParameters()[ParamMapper]; m != "" {
		vol.VolumeContext[ParamMapper] = m
	}
	if fsType != "" {
		vol.VolumeContext[ParamFsType] = fsType
	}
	if encrypted {
		vol.VolumeContext[ParamEncrypted] = "true"
	}
	if zone != "" {
		vol.AccessibleTopology = []*csi.Topology{{Segments: map[string]string{TopologyKey: zone}}}
	}
	return &csi.CreateVolumeResponse{Volume: vol}, nil
}

// createBlank makes id's blank image and returns its size. It creates it
// straight away rather than first opening the name to see whether it
// exists (an open costs librbd a dozen RADOS ops and a copy of its whole
// configuration); a retry, or a second replica racing on the same
// reservation, finds the name taken and answers the image made.
func (d *Driver) createBlank(io *rados.IOContext, id volumeID, cr *csi.CapacityRange, fs string, fsMin int64, opts *rbd.ImageOptions, params map[string]string) (int64, error) {
	size, err := d.sizeFor(cr, 0)
	if err != nil {
		return 0, err
	}
	if size < fsMin {
		// Grown to what the node's mkfs formats, within the limit, else
		// OutOfRange naming the minimum: refused here, not at stage.
		if size, err = mount.FitSize(fs, size, cr.GetLimitBytes(), fsMin); err != nil {
			return 0, err
		}
	}
	create := func() error { return rbd.CreateImage(io, id.image(), uint64(size), opts) }
	err = create()
	if err == nil {
		return size, nil
	}
	if !errors.Is(err, rbd.ErrExist) {
		return 0, createError(err, "create image "+id.image(), params)
	}
	if cur, ok, err := imageSize(io, id.image()); err != nil || ok {
		return cur, err
	}
	err = create()
	if errors.Is(err, rbd.ErrExist) {
		err = d.settle(io, id.image(), create)
	}
	if err != nil {
		return 0, createError(err, "create image "+id.image(), params)
	}
	return size, nil
}

// createClone makes id's image a clone of src's snapshot or volume and
// returns its size. A retry, or a second replica racing on the same
// reservation, finds the image made: the call that cloned it may have
// died before finishing the clone, and the journal's fingerprint makes
// this the same request, so it finishes it (resumeClone; every step is
// idempotent).
func (d *Driver) createClone(ctx context.Context, creds Credentials, io *rados.IOContext, id volumeID, src *csi.VolumeContentSource, r *csi.CreateVolumeRequest, opts *rbd.ImageOptions) (int64, error) {
	cur, ok, err := imageSize(io, id.image())
	if err != nil {
		return 0, err
	}
	if ok {
		return d.resumeClone(ctx, creds, io, id, src, r.GetCapacityRange(), cur)
	}
	// Clone v2: no protected snapshots, and a snapshot can be removed while
	// clones of it live.
	if err := opts.SetUint64(rbd.ImageOptionCloneFormat, 2); err != nil {
		return 0, status.Errorf(codes.Internal, "image options: %v", err)
	}
	block := wantsBlock(r.GetVolumeCapabilities())
	if s := src.GetSnapshot(); s != nil {
		return d.cloneFromSnapshot(ctx, creds, io, id, s.GetSnapshotId(), r.GetCapacityRange(), opts, block)
	}
	// Validation let through only a snapshot or a volume source.
	return d.cloneFromVolume(ctx, creds, io, id, src.GetVolume().GetVolumeId(), r.GetCapacityRange(), opts, block)
}

// imageSize is the size of image name; ok is false when there is none.
func imageSize(io *rados.IOContext, name string) (size int64, ok bool, err error) {
	img, err := rbd.OpenImageReadOnly(io, name, rbd.NoSnapshot)
	if errors.Is(err, rbd.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, backendError(err, "open image "+name)
	}
	s, err := img.GetSize()
	_ = img.Close()
	if err != nil {
		return 0, false, backendError(err, "size of image "+name)
	}
	return int64(s), true, nil
}

// settle handles an image name that exists but may not open: another
// replica creating it under the same reservation right now (it opens
// within moments), or the remains of a create killed halfway (it never
// will): those are removed and made again.
func (d *Driver) settle(io *rados.IOContext, name string, make func() error) error {
	for range 20 {
		if img, err := rbd.OpenImageReadOnly(io, name, rbd.NoSnapshot); err == nil {
			_ = img.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.opts.Logger.Warn("removing the remains of an interrupted image create", "image", name)
	if err := rbd.RemoveImage(io, name); err != nil && !errors.Is(err, rbd.ErrNotFound) {
		return err
	}
	return make()
}

// fsMinimum is the file system a mount volume of caps will be staged
// with (as stageFS picks it: fs_type, else the fsType parameter, else
// ext4) that needs the largest device, and that size (mount.MinSize: what
// mkfs formats here; xfs 300 MiB). Block-only volumes need none. A
// controller without the mkfs to ask cannot tell, and creates the size
// asked; the node's stage then names mkfs's refusal.
func (d *Driver) fsMinimum(ctx context.Context, param string, caps []*csi.VolumeCapability) (string, int64, error) {
	var fs string
	var most int64
	for _, c := range caps {
		if c.GetMount() == nil {
			continue
		}
		t, _ := stageFS(c.GetMount(), map[string]string{ParamFsType: param})
		n, err := d.mounter.MinSize(ctx, t)
		if ctx.Err() != nil {
			return "", 0, err
		}
		if err != nil {
			d.opts.Logger.WarnContext(ctx, "cannot tell the smallest device mkfs formats; creating the size asked", "fsType", t, "error", err)
			continue
		}
		if n > most {
			fs, most = t, n
		}
	}
	return fs, most, nil
}

// fsNames are the file systems mount volumes may have.
const fsNames = "ext4 or xfs"

func supportedFS(t string) bool { return t == "ext4" || t == "xfs" }

// checkCaps refuses capabilities the driver cannot serve: RBD images are
// single-node, block or mount.
func checkCaps(caps []*csi.VolumeCapability) error {
	for _, c := range caps {
		switch c.GetAccessMode().GetMode() {
		case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:
		default:
			return status.Errorf(codes.InvalidArgument, "access mode %s is not supported: RBD volumes are single-node", c.GetAccessMode().GetMode())
		}
		if c.GetBlock() != nil && c.GetMount() != nil {
			return status.Error(codes.InvalidArgument, "a capability is block or mount, not both")
		}
	}
	return nil
}

// finishClone resizes a fresh clone to the requested size and flattens it
// when its chain is too deep; a clone the request's range does not fit is
// removed.
func (d *Driver) finishClone(ctx context.Context, creds Credentials, io *rados.IOContext, name string, srcSize int64, cr *csi.CapacityRange) (int64, error) {
	size, err := d.sizeFor(cr, srcSize)
	if err != nil {
		_ = rbd.RemoveImage(io, name)
		return 0, err
	}
	if err := d.completeClone(ctx, creds, io, name, size); err != nil {
		return 0, err
	}
	return size, nil
}

// resumeClone finishes a clone found made under the reserved ID, whose
// maker may have died between cloning and finishing: it removes a volume
// source's temporary snapshot, then grows and flattens the clone as
// finishClone would have. A range the clone does not fit is the caller's
// AlreadyExists, not a reason to remove it.
func (d *Driver) resumeClone(ctx context.Context, creds Credentials, io *rados.IOContext, id volumeID, src *csi.VolumeContentSource, cr *csi.CapacityRange, cur int64) (int64, error) {
	if v := src.GetVolume(); v != nil {
		d.dropCloneSnap(ctx, creds, id, v.GetVolumeId())
	}
	if lim := cr.GetLimitBytes(); lim > 0 && cur > lim {
		return cur, nil
	}
	size, err := d.sizeFor(cr, cur)
	if err != nil {
		return 0, err
	}
	if err := d.completeClone(ctx, creds, io, id.image(), size); err != nil {
		return 0, err
	}
	return size, nil
}

// dropCloneSnap removes the temporary snapshot a clone of volume srcID
// under id was made from, if it is still there and the clone is attached
// to it. A clone not (yet) among the snapshot's children is another
// replica's clone in progress, which removes the snapshot itself: removing
// it now would fail that clone. A source that is gone or unreadable is
// left alone: the snapshot then only delays the source's removal
// (DeleteVolume keeps an image with snapshots as csi-del-…).
func (d *Driver) dropCloneSnap(ctx context.Context, creds Credentials, id volumeID, srcID string) {
	v, ok := parseVolumeID(srcID)
	if !ok {
		return
	}
	sio, _, done, err := d.volumeIO(ctx, creds, v.pool)
	if err != nil {
		return
	}
	defer done()
	at, err := rbd.OpenImageReadOnly(sio, v.image(), id.cloneSnap())
	if err != nil {
		return // removed already (or the source is gone)
	}
	_, children, err := at.ListChildren()
	_ = at.Close()
	if err != nil || !slices.Contains(children, id.image()) {
		return
	}
	src, err := rbd.OpenImage(sio, v.image(), rbd.NoSnapshot)
	if err != nil {
		return
	}
	defer src.Close()
	d.removeCloneSnap(src, srcID, id.cloneSnap())
}

// removeCloneSnap removes the temporary snapshot snap of source volume
// srcID (open as src) once a clone is made from it; one it cannot remove is
// logged, not failed: it only delays the source's removal.
func (d *Driver) removeCloneSnap(src *rbd.Image, srcID, snap string) {
	if err := src.GetSnapshot(snap).Remove(); err != nil && !errors.Is(err, rbd.ErrNotFound) {
		d.opts.Logger.Warn("could not remove the clone's temporary snapshot", "volume", srcID, "snapshot", snap, "error", err)
	}
}

// completeClone grows clone name to size if it is smaller and flattens it
// when its chain is deeper than Options.MaxCloneDepth.
func (d *Driver) completeClone(ctx context.Context, creds Credentials, io *rados.IOContext, name string, size int64) error {
	img, err := rbd.OpenImage(io, name, rbd.NoSnapshot)
	if err != nil {
		return backendError(err, "open clone "+name)
	}
	defer img.Close()
	if cur, err := img.GetSize(); err == nil && int64(cur) < size {
		if err := img.Resize(uint64(size)); err != nil {
			return backendError(err, "resize clone "+name)
		}
	}
	depth, err := d.chainDepth(ctx, creds, img)
	if err != nil {
		return err
	}
	if d.opts.MaxCloneDepth < 0 || depth > d.opts.MaxCloneDepth {
		if err := img.Flatten(); err != nil && cephErrno(err) != 22 { // EINVAL: no parent (flattened already)
			return backendError(err, "flatten clone "+name)
		}
	}
	return nil
}

// chainDepth is how many parents img has.
func (d *Driver) chainDepth(ctx context.Context, creds Credentials, img *rbd.Image) (int, error) {
	depth := 0
	cur := img
	defer func() {
		if cur != img {
			_ = cur.Close()
		}
	}()
	for depth <= 64 {
		p, err := cur.GetParent()
		if errors.Is(err, rbd.ErrNotFound) || (err == nil && p.Image.ImageID == "") {
			return depth, nil
		}
		if err != nil {
			return 0, backendError(err, "parent of an image")
		}
		depth++
		pio, done, err := d.conns.IOContext(ctx, creds, p.Image.PoolName, p.Image.PoolNamespace)
		if err != nil {
			return depth, nil
		}
		next, err := rbd.OpenImageByIdReadOnly(pio, p.Image.ImageID, rbd.NoSnapshot)
		done()
		if err != nil {
			return depth, nil
		}
		if cur != img {
			_ = cur.Close()
		}
		cur = next
	}
	return depth, nil
}

// findSnapshotImage opens the image holding snapshot s: csi-vol-<hex>, or
// csi-del-<hex> if its volume was deleted while the snapshot lived.
func findSnapshotImage(io *rados.IOContext, s snapshotID) (*rbd.Image, error) {
	for _, name := range []string{s.vol.image(), s.vol.deleted()} {
		img, err := rbd.OpenImage(io, name, rbd.NoSnapshot)
		if errors.Is(err, rbd.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, backendError(err, "open image "+name)
		}
		if _, err := img.GetSnapID(s.snap()); err != nil {
			_ = img.Close()
			if cephErrno(err) == 2 {
				return nil, nil
			}
			return nil, backendError(err, "look up snapshot")
		}
		return img, nil
	}
	return nil, nil
}

func (d *Driver) cloneFromSnapshot(ctx context.Context, creds Credentials, io *rados.IOContext, id volumeID, snapID string, cr *csi.CapacityRange, opts *rbd.ImageOptions, block bool) (int64, error) {
	s, ok := parseSnapshotID(snapID)
	if !ok {
		return 0, status.Errorf(codes.NotFound, "snapshot %q does not exist", snapID)
	}
	sio, _, done, err := d.volumeIO(ctx, creds, s.vol.pool)
	if status.Code(err) == codes.NotFound {
		return 0, status.Errorf(codes.NotFound, "snapshot %q does not exist", snapID)
	}
	if err != nil {
		return 0, err
	}
	defer done()
	parent, err := findSnapshotImage(sio, s)
	if err != nil {
		return 0, err
	}
	if parent == nil {
		return 0, status.Errorf(codes.NotFound, "snapshot %q does not exist", snapID)
	}
	defer parent.Close()
	if err := checkSourceAccess(s.vol.block, block, "snapshot "+snapID); err != nil {
		return 0, err
	}
	var srcSize int64
	snaps, err := parent.GetSnapshotNames()
	if err != nil {
		return 0, backendError(err, "list snapshots")
	}
	for _, sn := range snaps {
		if sn.Name == s.snap() {
			srcSize = int64(sn.Size)
		}
	}
	if lim := cr.GetLimitBytes(); lim > 0 && srcSize > lim {
		return 0, status.Errorf(codes.OutOfRange, "snapshot %s is %d bytes, more than the limit of %d", snapID, srcSize, lim)
	}
	clone := func() error { return rbd.CloneFromImage(parent, s.snap(), io, id.image(), opts) }
	if err := clone(); errors.Is(err, rbd.ErrExist) {
		if err := d.settle(io, id.image(), clone); err != nil {
			return 0, backendError(err, "clone snapshot "+snapID)
		}
	} else if err != nil {
		return 0, backendError(err, "clone snapshot "+snapID)
	}
	return d.finishClone(ctx, creds, io, id.image(), srcSize, cr)
}

func (d *Driver) cloneFromVolume(ctx context.Context, creds Credentials, io *rados.IOContext, id volumeID, srcID string, cr *csi.CapacityRange, opts *rbd.ImageOptions, block bool) (int64, error) {
	v, ok := parseVolumeID(srcID)
	if !ok {
		return 0, status.Errorf(codes.NotFound, "volume %q does not exist", srcID)
	}
	sio, _, done, err := d.volumeIO(ctx, creds, v.pool)
	if status.Code(err) == codes.NotFound {
		return 0, status.Errorf(codes.NotFound, "volume %q does not exist", srcID)
	}
	if err != nil {
		return 0, err
	}
	defer done()
	src, err := rbd.OpenImage(sio, v.image(), rbd.NoSnapshot)
	if errors.Is(err, rbd.ErrNotFound) {
		return 0, status.Errorf(codes.NotFound, "volume %q does not exist", srcID)
	}
	if err != nil {
		return 0, backendError(err, "open source volume")
	}
	defer src.Close()
	if err := checkSourceAccess(v.block, block, "volume "+srcID); err != nil {
		return 0, err
	}
	srcSize, err := src.GetSize()
	if err != nil {
		return 0, backendError(err, "size of source volume")
	}
	if lim := cr.GetLimitBytes(); lim > 0 && int64(srcSize) > lim {
		return 0, status.Errorf(codes.OutOfRange, "volume %s is %d bytes, more than the limit of %d", srcID, srcSize, lim)
	}
	// A short-lived snapshot to clone from; with clone v2 it can be removed
	// at once (it stays, hidden in the trash, while the clone needs it).
	snap := id.cloneSnap()
	if _, err := src.CreateSnapshot(snap); err != nil && !errors.Is(err, rbd.ErrExist) {
		return 0, backendError(err, "snapshot source volume")
	}
	clone := func() error { return rbd.CloneFromImage(src, snap, io, id.image(), opts) }
	err = clone()
	if errors.Is(err, rbd.ErrExist) {
		err = d.settle(io, id.image(), clone)
	}
	if err != nil {
		_ = src.GetSnapshot(snap).Remove()
		return 0, backendError(err, "clone volume "+srcID)
	}
	d.removeCloneSnap(src, srcID, snap)
	return d.finishClone(ctx, creds, io, id.image(), int64(srcSize), cr)
}

// DeleteVolume removes the image. An image that still has snapshots or
// clones is renamed csi-del-<hex> instead and removed when the last of
// them goes. A mapped image (it has watchers) is FailedPrecondition.
func (d *Driver) DeleteVolume(ctx context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id, ok := parseVolumeID(r.GetVolumeId())
	if !ok {
		return &csi.DeleteVolumeResponse{}, nil // no such volume can exist
	}
	creds, err := CredentialsFromSecrets(r.GetSecrets())
	if err != nil {
		return nil, err
	}
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	io, pool, done, err := d.volumeIO(ctx, creds, id.pool)
	if status.Code(err) == codes.NotFound {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer done()
	var parent string
	// The recorded size goes first: a volume whose image outlives it
	// (a failed or refused remove) is listed with its header's size.
	if err := d.forgetSize(ctx, creds, pool, id.image()); err != nil {
		return nil, err
	}
	if id.clone { // only clones can have a hidden parent to reap afterwards
		img, err := rbd.OpenImageReadOnly(io, id.image(), rbd.NoSnapshot)
		if errors.Is(err, rbd.ErrNotFound) {
			return &csi.DeleteVolumeResponse{}, nil
		}
		if err != nil {
			return nil, backendError(err, "open image")
		}
		if p, err := img.GetParent(); err == nil {
			parent = p.Image.ImageName
		}
		_ = img.Close()
	}
	if err := rbd.RemoveImage(io, id.image()); err != nil {
		switch cephErrno(err) {
		case 39, 16: // ENOTEMPTY: has snapshots; EBUSY: has clones, or watchers
			if mapped(io, id.image()) {
				return nil, status.Errorf(codes.FailedPrecondition, "volume %s is in use: a client has it open (mapped on a node: unstage it first; or a controller killed less than 30 s ago, whose watch expires by itself)", id)
			}
			// Hide it only for what really needs it: snapshots or clones.
			// Anything else (a watch expiring between the remove and the
			// look at watchers) is passing: the retry removes it.
			has, herr := hasDependents(io, id.image())
			if herr != nil {
				return nil, herr
			}
			if !has {
				return nil, status.Errorf(codes.Unavailable, "volume %s could not be removed yet (%v), and it has no snapshots or clones; a client probably released it just now: retry", id, err)
			}
			if err := rbd.GetImage(io, id.image()).Rename(id.deleted()); err != nil && !errors.Is(err, rbd.ErrNotFound) {
				return nil, backendError(err, "hide deleted image")
			}
			return &csi.DeleteVolumeResponse{}, nil
		}
		if !errors.Is(err, rbd.ErrNotFound) {
			return nil, backendError(err, "remove image")
		}
	}
	d.removeAccess(ctx, creds, id)
	if strings.HasPrefix(parent, deletedPrefix) {
		d.reap(io, parent)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// mapped reports whether a client has the image open (a node mapped it).
func mapped(io *rados.IOContext, name string) bool {
	img, err := rbd.OpenImageReadOnly(io, name, rbd.NoSnapshot)
	if err != nil {
		return false
	}
	defer img.Close()
	ws, err := img.ListWatchers()
	return err == nil && len(ws) > 0 // a read-only open does not watch
}

// hasDependents reports whether image name has snapshots (librbd lists
// those of every namespace: user, trash) or clones.
func hasDependents(io *rados.IOContext, name string) (bool, error) {
	img, err := rbd.OpenImageReadOnly(io, name, rbd.NoSnapshot)
	if errors.Is(err, rbd.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, backendError(err, "open image "+name)
	}
	defer img.Close()
	snaps, err := img.GetSnapshotNames()
	if err != nil {
		return false, backendError(err, "list snapshots of "+name)
	}
	if len(snaps) > 0 {
		return true, nil
	}
	_, children, err := img.ListChildren()
	if err != nil {
		return false, backendError(err, "list clones of "+name)
	}
	return len(children) > 0, nil
}

// reap removes a hidden deleted image once nothing needs it, and then its
// own hidden parent. Failures leave it for the next chance.
func (d *Driver) reap(io *rados.IOContext, name string) {
	for i := 0; i < 64 && strings.HasPrefix(name, deletedPrefix); i++ {
		img, err := rbd.OpenImage(io, name, rbd.NoSnapshot)
		if err != nil {
			return
		}
		snaps, err := img.GetSnapshotNames()
		var parent string
		if p, perr := img.GetParent(); perr == nil {
			parent = p.Image.ImageName
		}
		_ = img.Close()
		if err != nil || len(snaps) > 0 {
			return
		}
		if err := rbd.RemoveImage(io, name); err != nil {
			return // clones still use it
		}
		name = parent
	}
}

// openVolume opens the image of the volume volumeID names with the
// credentials in secrets; an ID of the wrong form, a missing pool or a
// missing image is NotFound. The returned func closes the image and the
// I/O context.
func (d *Driver) openVolume(ctx context.Context, volumeID string, secrets map[string]string, readOnly bool) (*rbd.Image, func(), error) {
	notFound := status.Errorf(codes.NotFound, "volume %q does not exist", volumeID)
	id, ok := parseVolumeID(volumeID)
	if !ok {
		return nil, nil, notFound
	}
	creds, err := CredentialsFromSecrets(secrets)
	if err != nil {
		return nil, nil, err
	}
	io, _, done, err := d.volumeIO(ctx, creds, id.pool)
	if status.Code(err) == codes.NotFound {
		return nil, nil, notFound
	}
	if err != nil {
		return nil, nil, err
	}
	open := rbd.OpenImage
	if readOnly {
		open = rbd.OpenImageReadOnly
	}
	img, err := open(io, id.image(), rbd.NoSnapshot)
	if errors.Is(err, rbd.ErrNotFound) || cephErrno(err) == 2 {
		done()
		return nil, nil, notFound
	}
	if err != nil {
		done()
		return nil, nil, backendError(err, "open image")
	}
	return img, func() { _ = img.Close(); done() }, nil
}

// recordExpanded records size as the provisioned size of r's volume.
func (d *Driver) recordExpanded(ctx context.Context, r *csi.ControllerExpandVolumeRequest, size int64) error {
	id, _ := parseVolumeID(r.GetVolumeId()) // openVolume parsed it
	creds, err := CredentialsFromSecrets(r.GetSecrets())
	if err != nil {
		return err
	}
	_, pool, done, err := d.volumeIO(ctx, creds, id.pool)
	if err != nil {
		return err
	}
	done()
	return d.recordSize(ctx, creds, pool, id.image(), size)
}

// ControllerExpandVolume grows the image and records its new size in the
// journal (ListVolumes reports it).
func (d *Driver) ControllerExpandVolume(ctx context.Context, r *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	ctx, cancel := d.opCtx(ctx)
	defer cancel()
	img, closeImg, err := d.openVolume(ctx, r.GetVolumeId(), r.GetSecrets(), false)
	if err != nil {
		return nil, err
	}
	defer closeImg()
	cur, err := img.GetSize()
	if err != nil {
		return nil, backendError(err, "image size")
	}
	size, err := d.sizeFor(r.GetCapacityRange(), 0)
	if err != nil {
		return nil, err
	}
	if size > int64(cur) {
		if err := img.Resize(uint64(size)); err != nil {
			return nil, backendError(err, "resize image")
		}
		cur = uint64(size)
	}
	// ListVolumes reports the recorded size: record what the image has
	// now (a retry after a failed record records it again).
	if err := d.recordExpanded(ctx, r, int64(cur)); err != nil {
		return nil, err
	}
	block := r.GetVolumeCapability().GetBlock() != nil
	// A block volume needs the node only when it is encrypted: its
	// dm-crypt mapping must grow with the image (encrypt.go).
	node := !block || hasLUKSHeader(img)
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: int64(cur), NodeExpansionRequired: node}, nil
}
