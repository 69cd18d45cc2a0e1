package driver

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/stats"
)

// stageRecord is what the node remembers about a staged volume, in
// <state>/staged/<volume ID>.json (root-only, no secrets): NodeUnstage and
// NodePublish carry no secrets and must still find the mapping.
type stageRecord struct {
	Pool   string `json:"pool"`
	Image  string `json:"image"`
	Mapper string `json:"mapper"`
	Block  bool   `json:"block"`
	// Encrypted: the data is on a dm-crypt mapping of the mapped image
	// (ParamEncrypted), which unstage closes before it unmaps, also
	// after a restart.
	Encrypted bool `json:"encrypted,omitempty"`
	// Device is the device of this node's krbd or rbd-nbd mapping
	// (Image.Device), recorded once the map returned it.
	Device string `json:"device,omitempty"`
}

func (d *Driver) recordPath(id volumeID) string {
	return filepath.Join(d.opts.StateDir, "staged", id.String()+".json")
}

func (d *Driver) readRecord(id volumeID) (stageRecord, bool, error) {
	b, err := os.ReadFile(d.recordPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return stageRecord{}, false, nil
	}
	if err != nil {
		return stageRecord{}, false, status.Errorf(codes.Internal, "read stage record: %v", err)
	}
	var r stageRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return stageRecord{}, false, status.Errorf(codes.Internal, "stage record of %s: %v", id, err)
	}
	return r, true, nil
}

// writeRecord makes id's stage record durable before it returns: written
// to a temporary file, synced, renamed into place, and the directory
// synced, so a node that loses power after the answer still finds the
// mapping to undo.
func (d *Driver) writeRecord(id volumeID, r stageRecord) error {
	dir := filepath.Dir(d.recordPath(id))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return status.Errorf(codes.Internal, "stage record: %v", err)
	}
	b, _ := json.Marshal(r)
	tmp := d.recordPath(id) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return status.Errorf(codes.Internal, "stage record: %v", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, d.recordPath(id))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return status.Errorf(codes.Internal, "stage record: %v", err)
	}
	return nil
}

// removeRecord removes id's stage record durably (the directory synced):
// a record that came back after a power cut would send the node looking
// for a mapping that is gone.
func (d *Driver) removeRecord(id volumeID) error {
	if err := os.Remove(d.recordPath(id)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return syncDir(filepath.Dir(d.recordPath(id)))
}

// syncDir fsyncs a directory, making the entries made or removed in it
// durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (d *Driver) image(id volumeID, r stageRecord, creds Credentials, ro bool) Image {
	return Image{Key: id.String(), Monitors: d.opts.Monitors, Pool: r.Pool, Name: r.Image, Creds: creds, ReadOnly: ro, Device: r.Device}
}

func (d *Driver) mapper(name string) (Mapper, error) {
	if name == "" {
		name = d.opts.Mapper
	}
	m, ok := d.mappers[name]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "mapper %q: want krbd, rbd-nbd or rbd-fuse", name)
	}
	return m, nil
}

// NodeStageVolume maps the image and, for mount volumes, mounts it
// (formatting a blank image) at the staging path. On failure nothing it
// made stays mapped or mounted.
func (d *Driver) NodeStageVolume(ctx context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id, ok := parseVolumeID(r.GetVolumeId())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", r.GetVolumeId())
	}
	creds, err := CredentialsFromSecrets(r.GetSecrets())
	if err != nil {
		return nil, err
	}
	if err := d.prepareStateDir(); err != nil {
		return nil, status.Errorf(codes.Internal, "state directory: %v", err)
	}
	pool, err := d.poolName(ctx, creds, id.pool)
	if err != nil {
		return nil, err
	}
	mname := r.GetVolumeContext()[ParamMapper]
	if mname == "" {
		mname = d.opts.Mapper
	}
	m, err := d.mapper(mname)
	if err != nil {
		return nil, err
	}
	rec := stageRecord{Pool: pool, Image: id.image(), Mapper: mname, Block: r.GetVolumeCapability().GetBlock() != nil,
		Encrypted: r.GetVolumeContext()[ParamEncrypted] == "true"}
	enc := encryption(id, rec.Encrypted, r.GetSecrets())
	if err := checkKey(ctx, enc); err != nil {
		return nil, err
	}
	old, restage, err := d.readRecord(id)
	if err != nil {
		return nil, err
	}
	if restage {
		rec.Device = old.Device
		if old != rec {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s is staged on this node with another capability or mapper", id)
		}
	}
	if mnt := r.GetVolumeCapability().GetMount(); mnt != nil {
		if t, _ := stageFS(mnt, r.GetVolumeContext()); !supportedFS(t) {
			return nil, status.Errorf(codes.InvalidArgument, "fs_type %q is not supported: want %s", t, fsNames)
		}
	}
	ro := r.GetVolumeCapability().GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
	img := d.image(id, rec, creds, ro)
	// Without a stage record this node has no mapping: one of the image
	// that krbd or rbd-nbd lists is another node plugin's on this host.
	hm, hostWide := m.(hostMapper)
	var found string
	wasMapped := false
	if restage || !hostWide {
		if found, wasMapped, err = m.Find(ctx, img); err != nil {
			return nil, err
		}
	}
	// Single-node: refused while another node holds the volume unfenced;
	// else this node's stage recorded in the volume's access object
	// (fence.go), before the map.
	before, err := d.claimStage(ctx, creds, id)
	if err != nil {
		return nil, err
	}
	// The record first: a crash after mapping must leave a way to unmap.
	if err := d.writeRecord(id, rec); err != nil {
		return nil, err
	}
	fail := func(err error) (*csi.NodeStageVolumeResponse, error) {
		if !wasMapped {
			if enc != nil {
				if cerr := d.mounter.CloseEncrypted(context.WithoutCancel(ctx), enc.VolumeID); cerr != nil {
					d.opts.Logger.Warn("could not close the dm-crypt mapping after a failed stage", "volume", id.String(), "error", cerr)
					return nil, err
				}
			}
			if uerr := m.Unmap(context.WithoutCancel(ctx), img); uerr != nil {
				d.opts.Logger.Warn("could not unmap after a failed stage", "volume", id.String(), "error", uerr)
				return nil, err
			}
			_ = d.removeRecord(id)
			d.releaseStage(context.WithoutCancel(ctx), id)
		}
		return nil, err
	}
	dev := found
	switch {
	case !hostWide:
		dev, err = m.Map(ctx, img)
	case !wasMapped:
		dev, err = hm.mapNew(ctx, img)
	}
	if err != nil {
		return fail(err)
	}
	if hostWide && rec.Device != dev {
		rec.Device = dev
		img.Device = dev
		if err := d.writeRecord(id, rec); err != nil {
			return fail(err)
		}
	}
	if !wasMapped {
		if err := d.recordStageClients(ctx, creds, id, before); err != nil {
			return fail(err)
		}
	}
	if rec.Block {
		if enc != nil {
			// The pod gets the mapping (NodePublishVolume), formatted
			// with LUKS2 here when the image is blank.
			if _, err := d.mounter.OpenEncrypted(ctx, dev, *enc, ro); err != nil {
				return fail(err)
			}
		}
		return &csi.NodeStageVolumeResponse{}, nil
	}
	mnt := r.GetVolumeCapability().GetMount()
	fsType, flags := stageFS(mnt, r.GetVolumeContext())
	err = d.mounter.Stage(ctx, mount.StageOptions{
		Device: dev, Target: r.GetStagingTargetPath(), FSType: fsType,
		MountFlags: flags, ReadOnly: ro, FormatOptions: noDiscard(fsType),
		Encryption: enc,
		// An image grown while unstaged: its ext4 grows before the mount,
		// so NodeExpandVolume finds nothing to grow online.
		Grow: true,
	})
	if err != nil {
		return fail(err)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// stageFS is the file system a mount volume is staged with (the
// capability's fs_type, else the volume's ParamFsType, else ext4) and its
// mount flags (mount.Stage mounts xfs with nouuid, so a clone or restore,
// same UUID, mounts beside its source).
func stageFS(mnt *csi.VolumeCapability_MountVolume, volCtx map[string]string) (string, []string) {
	t := mnt.GetFsType()
	if t == "" {
		t = volCtx[ParamFsType]
	}
	if t == "" {
		t = "ext4"
	}
	return t, mnt.GetMountFlags()
}

// noDiscard are mkfs's options for fsType that skip its discard pass: a
// blank image is a new one, unallocated, so the pass frees nothing, and
// through a mapper it costs a request per object (under rbd-nbd an xfs
// stage took 34 s instead of a few).
func noDiscard(fsType string) []string {
	switch {
	case strings.HasPrefix(fsType, "ext"):
		return []string{"-E", "nodiscard"}
	case fsType == "xfs":
		return []string{"-K"}
	}
	return nil
}

// NodeUnstageVolume unmounts the staging path and unmaps the image; it
// finds mappings made before a restart through the stage record.
func (d *Driver) NodeUnstageVolume(ctx context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	id, ok := parseVolumeID(r.GetVolumeId())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", r.GetVolumeId())
	}
	rec, ok, err := d.readRecord(id)
	if err != nil {
		return nil, err
	}
	// A fenced rbd-fuse hangs every I/O on its file: killed first, the
	// file system's unmount then fails its writes at once instead of
	// hanging in them (fusereap.go).
	if ok && rec.Mapper == MapperFUSE {
		d.mappers[MapperFUSE].(*fuseMapper).reapHung(d.image(id, rec, Credentials{}, false))
	}
	// The record says whether a dm-crypt mapping is to close (after the
	// unmount, before the unmap), also for a stage before a restart.
	if err := d.mounter.Unstage(ctx, r.GetStagingTargetPath(), mount.UnmountOptions{Encryption: encryption(id, rec.Encrypted, nil)}); err != nil {
		return nil, err
	}
	if !ok {
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	m, err := d.mapper(rec.Mapper)
	if err != nil {
		return nil, err
	}
	if err := m.Unmap(ctx, d.image(id, rec, Credentials{}, false)); err != nil {
		return nil, err
	}
	if err := d.removeRecord(id); err != nil {
		return nil, status.Errorf(codes.Internal, "remove stage record: %v", err)
	}
	d.releaseStage(ctx, id)
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// staged returns the stage record and device of a staged volume, or
// FailedPrecondition.
func (d *Driver) staged(ctx context.Context, rawID string) (volumeID, stageRecord, string, error) {
	id, ok := parseVolumeID(rawID)
	if !ok {
		return volumeID{}, stageRecord{}, "", status.Errorf(codes.NotFound, "volume %q does not exist", rawID)
	}
	rec, ok, err := d.readRecord(id)
	if err != nil {
		return id, rec, "", err
	}
	if !ok {
		return id, rec, "", status.Errorf(codes.FailedPrecondition, "volume %s is not staged on this node", id)
	}
	m, err := d.mapper(rec.Mapper)
	if err != nil {
		return id, rec, "", err
	}
	dev, ok, err := m.Find(ctx, d.image(id, rec, Credentials{}, false))
	if err != nil {
		return id, rec, "", err
	}
	if !ok {
		return id, rec, "", status.Errorf(codes.FailedPrecondition, "volume %s is not mapped on this node: stage it again", id)
	}
	return id, rec, dev, nil
}

// NodePublishVolume binds the staged file system, or the mapped device
// for block volumes, onto the target.
func (d *Driver) NodePublishVolume(ctx context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, rec, dev, err := d.staged(ctx, r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if dev, err = d.dataDevice(ctx, id, rec, dev); err != nil {
		return nil, err
	}
	isBlock := r.GetVolumeCapability().GetBlock() != nil
	if isBlock != rec.Block {
		return nil, status.Errorf(codes.InvalidArgument, "volume %s was staged as %s", r.GetVolumeId(), map[bool]string{true: "block", false: "mount"}[rec.Block])
	}
	if isBlock {
		if err := block.MountBlock(ctx, block.MountOptions{Device: dev, Target: r.GetTargetPath(), ReadOnly: r.GetReadonly()}); err != nil {
			return nil, err
		}
		return &csi.NodePublishVolumeResponse{}, nil
	}
	err = d.mounter.Publish(ctx, mount.PublishOptions{
		Source: r.GetStagingTargetPath(), Target: r.GetTargetPath(), ReadOnly: r.GetReadonly(),
		MountFlags: r.GetVolumeCapability().GetMount().GetMountFlags(),
	})
	if err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume removes the target's mount and the target.
func (d *Driver) NodeUnpublishVolume(ctx context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if _, ok := parseVolumeID(r.GetVolumeId()); !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", r.GetVolumeId())
	}
	target := r.GetTargetPath()
	var st unix.Stat_t
	if err := unix.Lstat(target, &st); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := block.UnmountBlock(ctx, target); err != nil {
			return nil, err
		}
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	if err := d.mounter.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeExpandVolume grows the file system online to the image's new size.
func (d *Driver) NodeExpandVolume(ctx context.Context, r *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	if _, err := os.Stat(r.GetVolumePath()); errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "volume path %s does not exist", r.GetVolumePath())
	}
	_, rec, dev, err := d.staged(ctx, r.GetVolumeId())
	if err != nil {
		if status.Code(err) == codes.FailedPrecondition {
			return nil, status.Errorf(codes.NotFound, "volume %s is not staged on this node", r.GetVolumeId())
		}
		return nil, err
	}
	if rec.Mapper == MapperFUSE {
		// rbd-fuse answers the new size once the kernel's attribute cache
		// (1 s) expires; then the loop device can take it.
		file := d.mappers[MapperFUSE].(*fuseMapper).file(d.image(mustID(r.GetVolumeId()), rec, Credentials{}, false))
		want := r.GetCapacityRange().GetRequiredBytes()
		for deadline := time.Now().Add(5 * time.Second); ; {
			st, err := os.Stat(file)
			if err != nil || st.Size() >= want || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err := block.RefreshLoopSize(ctx, dev); err != nil {
			return nil, err
		}
	}
	size, err := block.DeviceSize(dev)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "size of %s: %v", dev, err)
	}
	// An encrypted volume's mapping grows first (LUKS2 needs the key:
	// the node-expand secret), then its file system.
	enc := encryption(mustID(r.GetVolumeId()), rec.Encrypted, r.GetSecrets())
	if rec.Block || r.GetVolumeCapability().GetBlock() != nil {
		if enc != nil {
			if _, err := d.mounter.ResizeEncrypted(ctx, *enc); err != nil {
				return nil, err
			}
		}
		return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
	}
	path := r.GetStagingTargetPath()
	if path == "" {
		path = r.GetVolumePath()
	}
	if _, err := d.mounter.Resize(ctx, mount.ResizeOptions{Device: dev, Path: path, Encryption: enc}); err != nil {
		return nil, err
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}

// NodeGetVolumeStats reports usage through csikit's metrics package.
func (d *Driver) NodeGetVolumeStats(ctx context.Context, r *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	id, ok := parseVolumeID(r.GetVolumeId())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q does not exist", r.GetVolumeId())
	}
	rec, ok, err := d.readRecord(id)
	if err != nil {
		return nil, err
	} else if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %s is not staged on this node", id)
	}
	if err := mappingOpen(id, rec); err != nil {
		return nil, err
	}
	return stats.VolumeStats(ctx, r.GetVolumePath())
}

// mustID parses an ID already checked by the caller.
func mustID(s string) volumeID {
	v, _ := parseVolumeID(s)
	return v
}
