//go:build linux

package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	mountutils "k8s.io/mount-utils"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/fstree"
	"github.com/csikit/csikit/health"
	"github.com/csikit/csikit/k8s/keys"
	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/stats"
)

// checkAccessType refuses a capability whose access type does not match
// the volume's kind.
func checkAccessType(v *volume, c *csi.VolumeCapability) error {
	if (c.GetBlock() != nil) != (v.Kind == kindBlock) {
		return status.Errorf(codes.InvalidArgument, "volume %s is a %s volume: the capability's access type does not match", v.ID, v.Kind)
	}
	return nil
}

// NodeStageVolume makes the volume available at the staging path: a bind
// of the directory, a loop device, or a mounted filesystem on one. The
// staged marker is written last; when any step fails, a volume that was
// not staged before is left as it was — no loop device, no mount, no
// marker — because the CO need not call NodeUnstageVolume after a failed
// stage (kubelet records the volume as not staged).
func (d *Driver) NodeStageVolume(ctx context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := checkAccessType(&v, r.GetVolumeCapability()); err != nil {
		return nil, err
	}
	staging := r.GetStagingTargetPath()
	marker := d.stagedMarker(v.ID)
	_, statErr := os.Stat(marker)
	wasStaged := statErr == nil
	// The volume's filesystem was chosen at creation; a capability asking
	// for another one cannot be served (ALREADY_EXISTS for a repeat of a
	// stage, as the spec's table says, else INVALID_ARGUMENT).
	if err := d.checkFSType(&v, r.GetVolumeCapability().GetMount().GetFsType(), wasStaged); err != nil {
		return nil, err
	}
	flags := r.GetVolumeCapability().GetMount().GetMountFlags()
	var mounted bool // this call mounted staging
	switch v.Kind {
	case kindDir:
		// The stage is a bind of the volume's directory: the mount flags
		// are applied to it, and a flag a bind cannot take (a filesystem
		// option, sync, or none the kernel knows) is refused with
		// INVALID_ARGUMENT rather than dropped, so a StorageClass's
		// mountOptions never silently fail to hold. A repeat with other
		// flags finds the bind with different ones: ALREADY_EXISTS.
		if err := mount.CheckBindFlags(flags); err != nil {
			return nil, err
		}
		if err := d.materialize(ctx, &v); err != nil {
			return nil, err
		}
		err = d.mounter.Publish(ctx, mount.PublishOptions{Source: d.volumeDir(v.ID), Target: staging, AllowUnmountedSource: true, MountFlags: flags})
		mounted = err == nil
	case kindBlock:
		var dev string
		if dev, err = d.attach(ctx, &v); err == nil && v.encrypted() {
			_, err = d.mounter.OpenEncrypted(ctx, dev, *encryption(&v, r.GetSecrets()), false)
		}
	case kindFS:
		// A filesystem smaller than its file (a larger copy, an expansion
		// while staged) grows: ext4 before the mount, where it needs no
		// CAP_SYS_RESOURCE, xfs right after it. An encrypted volume's
		// file holds LUKS: its ext4 grows on the mapping, which the stage
		// opens over the whole file (StageOptions.Grow), and its xfs
		// after the mount, through the mapping.
		var growMounted bool
		if !wasStaged {
			growMounted, err = d.growBeforeStage(ctx, &v)
		}
		var dev string
		if err == nil {
			dev, err = d.attach(ctx, &v)
		}
		if err == nil {
			err = d.mounter.Stage(ctx, mount.StageOptions{
				Device: dev, Target: staging, FSType: v.FSType,
				MountFlags: stageFlags(v.FSType, flags), Encryption: encryption(&v, r.GetSecrets()),
				Grow: v.encrypted() && !wasStaged,
			})
			mounted = err == nil
		}
		if err == nil && growMounted {
			if _, err = d.mounter.Resize(ctx, mount.ResizeOptions{Device: dev, Path: staging, Encryption: encryption(&v, r.GetSecrets())}); err != nil {
				code := status.Code(err)
				if strings.Contains(err.Error(), "No space left on device") { // the state filesystem is full
					code = codes.ResourceExhausted
				}
				err = status.Errorf(code, "grow the filesystem of volume %s to its size after mounting it: %v", v.ID, err)
			}
		}
	}
	if err == nil && !wasStaged {
		if err = writeMarker(marker); err != nil {
			err = status.Errorf(codes.Internal, "record staging of %s: %v", v.ID, err)
		}
	}
	if err != nil {
		if !wasStaged {
			d.undoStage(&v, staging, mounted)
		}
		return nil, err
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// stageFlags are the mount flags of a filesystem volume's stage: the
// capability's, and for ext4 errors=remount-ro unless they choose another
// errors= behaviour — a filesystem that found corruption stops taking
// writes, and NodeGetVolumeHealth reports it (FilesystemReadOnly) instead
// of ext4's default of carrying on. (xfs volumes need nothing here:
// mount.Stage mounts xfs with nouuid, so a clone or a restored snapshot,
// a copy of its source's image, UUID included, stages beside its source.)
func stageFlags(fsType string, flags []string) []string {
	if fsType == "ext4" && !slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(f, "errors=") }) {
		return append(slices.Clone(flags), "errors=remount-ro")
	}
	return flags
}

// checkFSType refuses a capability's fs_type the volume cannot serve:
// a filesystem volume serves the filesystem it was created with; a
// directory volume has none of its own and serves "" or the type of the
// filesystem its directory lives on (what the pod really gets). A refusal
// is ALREADY_EXISTS when the volume is staged (the spec's answer to a
// repeat that is incompatible with what is staged) and INVALID_ARGUMENT
// otherwise.
func (d *Driver) checkFSType(v *volume, fsType string, staged bool) error {
	var have string
	switch {
	case fsType == "" || v.Kind == kindBlock:
		return nil
	case v.Kind == kindFS:
		have = v.FSType
	case v.Kind == kindDir:
		var err error
		dir := d.dirData(v)
		if dir == "" {
			dir = d.volumesRoot() // where a Lazy volume's directory will be
		}
		if have, err = fsTypeOf(dir); err != nil {
			return status.Errorf(codes.Internal, "find the filesystem of volume %s: %v", v.ID, err)
		}
	}
	if fsType == have {
		return nil
	}
	what := "filesystem " + have
	if v.Kind == kindDir {
		what = "a directory on " + have + " (create the volume with fsType " + fsType + " for a filesystem of its own)"
	}
	if staged {
		return status.Errorf(codes.AlreadyExists, "volume %s is staged as %s, not fs_type %s", v.ID, what, fsType)
	}
	return status.Errorf(codes.InvalidArgument, "volume %s is %s: fs_type %s cannot be served", v.ID, what, fsType)
}

// fsTypeOf returns the type of the filesystem holding path, as
// /proc/self/mountinfo names it: that of the deepest mount point at or
// above it (the top one where mounts are stacked).
func fsTypeOf(path string) (string, error) {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		path = r
	}
	mounts, err := mountutils.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	best, fsType := -1, ""
	for _, e := range mounts {
		if e.MountPoint == path || e.MountPoint == "/" || strings.HasPrefix(path, e.MountPoint+"/") {
			if len(e.MountPoint) >= best {
				best, fsType = len(e.MountPoint), e.FsType
			}
		}
	}
	if best < 0 {
		return "", errors.New("no mount holds " + path)
	}
	return fsType, nil
}

// undoStage takes back what a failed NodeStageVolume of a volume that was
// not staged set up: the mount it made and the loop device. It runs on a
// context of its own, so a cancelled request still cleans up; what it
// cannot undo is logged (DeleteVolume detaches a leftover loop device too).
func (d *Driver) undoStage(v *volume, staging string, mounted bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if mounted {
		if err := d.mounter.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
			d.log.Warn("failed stage: could not unmount the staging path", "volume", v.ID, "error", err)
			return // the loop device is still in use
		}
	}
	if v.encrypted() {
		if err := d.mounter.CloseEncrypted(ctx, v.ID); err != nil {
			d.log.Warn("failed stage: could not close the dm-crypt mapping", "volume", v.ID, "error", err)
			return
		}
	}
	if err := d.detachIfAttached(ctx, v); err != nil {
		d.log.Warn("failed stage: could not detach the loop device", "volume", v.ID, "error", err)
	}
}

// attach attaches (or finds) the loop device of a block or filesystem
// volume.
func (d *Driver) attach(ctx context.Context, v *volume) (string, error) {
	return block.AttachLoop(ctx, d.volumeImage(v.ID), block.LoopOptions{})
}

func writeMarker(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}

// NodeUnstageVolume undoes NodeStageVolume; it is idempotent.
func (d *Driver) NodeUnstageVolume(ctx context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if v.Kind != kindBlock {
		if err := d.mounter.Unstage(ctx, r.GetStagingTargetPath(), mount.UnmountOptions{Encryption: encryption(&v, nil)}); err != nil {
			return nil, err
		}
	} else if v.encrypted() {
		if err := d.mounter.CloseEncrypted(ctx, v.ID); err != nil {
			return nil, err
		}
	}
	if err := d.detachIfAttached(ctx, &v); err != nil {
		return nil, err
	}
	if err := os.Remove(d.stagedMarker(v.ID)); err != nil && !errNotExist(err) {
		return nil, status.Errorf(codes.Internal, "clear staging record: %v", err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume binds the staged volume (or, for inline ephemeral
// volumes, a new directory) onto the target path.
func (d *Driver) NodePublishVolume(ctx context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if keys.IsEphemeral(r.GetVolumeContext()) {
		return d.publishEphemeral(ctx, r)
	}
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	c := r.GetVolumeCapability()
	if err := checkAccessType(&v, c); err != nil {
		return nil, err
	}
	ro := r.GetReadonly() || c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
	target := r.GetTargetPath()
	if c.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER &&
		len(v.Published) > 0 && !slices.Contains(v.Published, target) {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is single-writer and already published at another target path", v.ID)
	}
	if err := d.publish(ctx, &v, r, ro); err != nil {
		return nil, err
	}
	if !slices.Contains(v.Published, target) {
		v.Published = append(v.Published, target)
		if err := d.store.putVolume(ctx, &v); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// publish mounts the staged volume at the target path.
func (d *Driver) publish(ctx context.Context, v *volume, r *csi.NodePublishVolumeRequest, ro bool) error {
	c := r.GetVolumeCapability()
	if v.Kind == kindBlock {
		dev, ok, err := block.FindLoop(ctx, d.volumeImage(v.ID))
		if err != nil {
			return err
		}
		if !ok {
			return status.Errorf(codes.FailedPrecondition, "volume %s is not staged on this node", v.ID)
		}
		if v.encrypted() { // publish the mapping, never the ciphertext
			if err := d.mounter.CheckEncrypted(ctx, v.ID, dev); err != nil {
				return status.Errorf(codes.FailedPrecondition, "volume %s is not staged on this node: %v", v.ID, err)
			}
			dev = filepath.Join(crypt.MapperDir, crypt.MappingName(v.ID))
		}
		return block.MountBlock(ctx, block.MountOptions{Device: dev, Target: r.GetTargetPath(), ReadOnly: ro})
	}
	staged, err := d.mounter.IsMountPoint(ctx, r.GetStagingTargetPath())
	if err != nil && !errNotExist(err) {
		return err
	}
	if !staged {
		return status.Errorf(codes.FailedPrecondition, "volume %s is not staged at the staging path", v.ID)
	}
	flags := c.GetMount().GetMountFlags()
	if v.Kind == kindFS {
		// The stage mounted the filesystem with every flag; the publish
		// bind repeats the per-mount ones.
		flags = mount.BindFlags(flags)
	}
	// A directory volume's flags all go to the bind, which refuses those
	// it cannot apply (INVALID_ARGUMENT, mount.CheckBindFlags).
	return d.mounter.Publish(ctx, mount.PublishOptions{
		Source: r.GetStagingTargetPath(), Target: r.GetTargetPath(), ReadOnly: ro,
		MountFlags: flags,
	})
}

// publishEphemeral creates an inline ephemeral volume and publishes it.
func (d *Driver) publishEphemeral(ctx context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id := r.GetVolumeId()
	if !validID(id) {
		return nil, status.Errorf(codes.InvalidArgument, "ephemeral volume ID %q: want 1-128 of [A-Za-z0-9._-]", id)
	}
	if r.GetVolumeCapability().GetBlock() != nil {
		return nil, status.Error(codes.InvalidArgument, "ephemeral inline volumes are mount volumes")
	}
	if err := mount.CheckBindFlags(r.GetVolumeCapability().GetMount().GetMountFlags()); err != nil {
		return nil, err // before the volume exists: a refused publish leaves nothing
	}
	if _, ok := d.store.volume(id); !ok {
		v := &volume{ID: id, Name: id, Capacity: defaultVolumeSize, Kind: kindDir, Ephemeral: true, Created: time.Now().UTC()}
		// Counted, never refused: the CO checks no capacity for inline
		// volumes, so refusing one would only keep its pod from starting.
		d.ledger.add(id, v.Capacity)
		if err := d.createData(ctx, v, nil); err != nil {
			d.ledger.cancel(id)
			return nil, err
		}
		if err := d.store.putVolume(ctx, v); err != nil {
			d.discardData(v)
			d.ledger.cancel(id)
			return nil, status.Error(codes.Internal, err.Error())
		}
		d.ledger.commit(id)
	}
	err := d.mounter.Publish(ctx, mount.PublishOptions{Source: d.volumeDir(id), Target: r.GetTargetPath(), ReadOnly: r.GetReadonly(),
		AllowUnmountedSource: true, MountFlags: r.GetVolumeCapability().GetMount().GetMountFlags()})
	if err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume removes the publish mount; an ephemeral volume is
// deleted with it.
func (d *Driver) NodeUnpublishVolume(ctx context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if v.Kind == kindBlock {
		err = block.UnmountBlock(ctx, r.GetTargetPath())
	} else {
		err = d.mounter.Unpublish(ctx, r.GetTargetPath(), mount.UnmountOptions{})
	}
	if err != nil {
		return nil, err
	}
	if i := slices.Index(v.Published, r.GetTargetPath()); i >= 0 && !v.Ephemeral {
		v.Published = slices.Delete(v.Published, i, i+1)
		if err := d.store.putVolume(ctx, &v); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	if v.Ephemeral {
		if err := d.removeData(ctx, &v); err != nil {
			return nil, err // the volume stays known: kubelet's retry tries again
		}
		if err := d.store.delVolume(ctx, v.ID); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		d.ledger.release(v.ID)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports usage: statfs for filesystems, the device
// size for block volumes; a directory volume without a quota counts its
// own tree as used.
func (d *Driver) NodeGetVolumeStats(ctx context.Context, r *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	resp, err := stats.VolumeStats(ctx, r.GetVolumePath())
	if err != nil || v.Kind != kindDir || d.quotas {
		return resp, err
	}
	// A directory volume without a project quota is a directory of the
	// state directory's filesystem: statfs gives that filesystem's size
	// and free space, and used bytes of everything on it. Used is the
	// volume's own tree (fstree.Usage: allocated blocks, no symlinks
	// followed, no mounts crossed), so it tracks the volume's writes and
	// nobody else's.
	var u fstree.UsageStats
	if dir := d.dirData(&v); dir != "" { // else Lazy: nothing written
		if u, err = fstree.Usage(ctx, dir); err != nil {
			return nil, err
		}
	}
	for _, e := range resp.GetUsage() {
		if e.GetUnit() == csi.VolumeUsage_BYTES {
			e.Used, e.Available = u.Bytes, max(0, min(e.GetAvailable(), e.GetTotal()-u.Bytes))
		}
		if e.GetUnit() == csi.VolumeUsage_INODES {
			e.Used, e.Available = u.Inodes, max(0, min(e.GetAvailable(), e.GetTotal()-u.Inodes))
		}
	}
	return resp, nil
}

// NodeGetVolumeHealth reports abnormal conditions of the volume's paths
// (missing, not mounted, device gone, filesystem turned read-only after
// errors) and of its backend (backendHealth: data missing or unreadable,
// backing file truncated, loop device gone).
func (d *Driver) NodeGetVolumeHealth(ctx context.Context, r *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	opts := health.Options{Check: d.backendHealth}
	if v.Kind == kindBlock {
		opts.Skip = health.CheckMounted | health.CheckWritable
		// A block volume's stage attaches a loop device and makes nothing
		// at the staging path: only the publish path has something to
		// examine (backendHealth covers the loop device).
		r = &csi.NodeGetVolumeHealthRequest{VolumeId: r.GetVolumeId(), VolumePublishPath: r.GetVolumePublishPath()}
	}
	return health.NodeVolume(ctx, r, opts)
}

// NodeExpandVolume makes the node see a grown volume: the loop device is
// refreshed and the filesystem grown online.
func (d *Driver) NodeExpandVolume(ctx context.Context, r *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	v, err := d.lookup(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(r.GetVolumePath()); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume path of %s does not exist", v.ID)
	}
	if v.Kind == kindDir {
		return &csi.NodeExpandVolumeResponse{CapacityBytes: v.Capacity}, nil
	}
	dev, ok, err := block.FindLoop(ctx, d.volumeImage(v.ID))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged on this node", v.ID)
	}
	if err := block.RefreshLoopSize(ctx, dev); err != nil {
		return nil, err
	}
	enc := encryption(&v, r.GetSecrets())
	if v.Kind == kindFS {
		path := r.GetStagingTargetPath()
		if path == "" {
			path = r.GetVolumePath()
		}
		if _, err := d.mounter.Resize(ctx, mount.ResizeOptions{Device: dev, Path: path, Encryption: enc}); err != nil {
			return nil, err
		}
	} else if enc != nil {
		if _, err := d.mounter.ResizeEncrypted(ctx, *enc); err != nil {
			return nil, err
		}
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: v.Capacity}, nil
}

// encrypted reports whether the volume was created with encrypted: "true".
func (v *volume) encrypted() bool { return v.Params[ParamEncrypted] == "true" && v.Kind != kindDir }

// imageSize is the size of the backing file of a volume of capacity
// bytes: an encrypted volume's has room for its LUKS2 header on top, so
// the pod gets the whole capacity. It is also the volume's charge in the
// capacity ledger (GetCapacity), the header included.
func (v *volume) imageSize(capacity int64) int64 {
	if v.encrypted() {
		return capacity + crypt.HeaderBytes
	}
	return capacity
}

// encryption is the mount option of an encrypted volume, its key from the
// call's secrets (crypt.SecretKey); nil for a plain volume.
func encryption(v *volume, secrets map[string]string) *mount.Encryption {
	if !v.encrypted() {
		return nil
	}
	return &mount.Encryption{VolumeID: v.ID, Key: crypt.SecretKeys(secrets)}
}
