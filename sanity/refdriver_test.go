//go:build linux

package sanity_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// refDriver is the harness's own reference driver: volumes are
// directories under a state directory, staging and publishing are real
// bind mounts (so it needs root), snapshots and clones are copies. Its
// state lives entirely on disk, so a new refDriver on the same directory
// is the old one restarted. Block volumes are sparse image files attached
// to loop devices at stage time.
//
// fault, when set, breaks one behaviour on purpose; faults_test.go checks
// that the case meant to catch each fault does.
type refDriver struct {
	dir   string
	log   *slog.Logger
	fault string
	gen   string // per-instance, for the forget_on_restart fault

	mu    sync.Mutex
	names map[string]string // forget_on_restart: name → ID, in memory only
}

const refMaxBytes = 1 << 40

func newRefDriver(dir string, log *slog.Logger, fault string) *refDriver {
	for _, d := range []string{"vols", "snaps"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o750); err != nil {
			panic(err)
		}
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &refDriver{dir: dir, log: log, fault: fault, gen: hex.EncodeToString(b), names: map[string]string{}}
}

type refMeta struct {
	Name     string `json:"name"`
	Capacity int64  `json:"capacity,omitempty"`
	Source   string `json:"source,omitempty"` // snapshots: source volume; volumes: "snap:ID" or "vol:ID"
	Created  int64  `json:"created,omitempty"`
	Block    bool   `json:"block,omitempty"` // data is disk.img, not the data directory
}

func hashID(prefix, name string) string {
	h := sha256.Sum256([]byte(name))
	return prefix + hex.EncodeToString(h[:10])
}

// safe rejects IDs that are not ours before they reach a path.
func safe(id string) bool {
	if len(id) != 21 || (id[0] != 'v' && id[0] != 's') {
		return false
	}
	_, err := hex.DecodeString(id[1:])
	return err == nil
}

func (d *refDriver) volDir(id string) string { return filepath.Join(d.dir, "vols", id) }
func (d *refDriver) img(id string) string    { return filepath.Join(d.volDir(id), "disk.img") }

// stagedMark exists while a volume is staged; DeleteVolume refuses then.
func (d *refDriver) stagedMark(id string) string { return filepath.Join(d.volDir(id), "staged") }

// fill creates a volume or snapshot directory with meta m and the data of
// the volume or snapshot directory from, if any.
func (d *refDriver) fill(dir, from string, m refMeta) error {
	if err := writeMeta(dir, m); err != nil {
		return err
	}
	if m.Block {
		if from != "" {
			if err := copyFile(filepath.Join(from, "disk.img"), filepath.Join(dir, "disk.img")); err != nil {
				return err
			}
		}
		f, err := os.OpenFile(filepath.Join(dir, "disk.img"), os.O_RDWR|os.O_CREATE, 0o640)
		if err != nil {
			return err
		}
		return errors.Join(f.Truncate(m.Capacity), f.Close())
	}
	if from == "" {
		return nil
	}
	return copyDir(filepath.Join(from, "data"), filepath.Join(dir, "data"))
}
func (d *refDriver) snapDir(id string) string { return filepath.Join(d.dir, "snaps", id) }

func readMeta(dir string) (refMeta, bool) {
	var m refMeta
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return m, false
	}
	return m, json.Unmarshal(b, &m) == nil
}

func writeMeta(dir string, m refMeta) error {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o750); err != nil {
		return err
	}
	b, _ := json.Marshal(m)
	tmp := filepath.Join(dir, "meta.json.tmp")
	if err := os.WriteFile(tmp, b, 0o640); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "meta.json"))
}

func (d *refDriver) volume(id string) (refMeta, error) {
	if !safe(id) {
		return refMeta{}, status.Errorf(codes.NotFound, "volume %q not found", id)
	}
	m, ok := readMeta(d.volDir(id))
	if !ok {
		return m, status.Errorf(codes.NotFound, "volume %q not found", id)
	}
	return m, nil
}

// refObjects lists the reference driver's backend objects under dir:
// volumes, snapshots and anything in a trash directory, as
// "vols/<id>", "snaps/<id>", "trash/<id>".
func refObjects(dir string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) {
		var out []string
		for _, sub := range []string{"vols", "snaps", "trash"} {
			es, err := os.ReadDir(filepath.Join(dir, sub))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			for _, e := range es {
				out = append(out, sub+"/"+e.Name())
			}
		}
		return out, nil
	}
}

// NodeGetInfo names the node; with the backend_leak_outside_case fault it
// first leaves a stray object in the trash (the harness asks once before
// its first case, so no case sees it appear).
func (d *refDriver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	if d.fault == "backend_leak_outside_case" {
		if err := os.MkdirAll(filepath.Join(d.dir, "trash", "stray"), 0o750); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	return &csi.NodeGetInfoResponse{NodeId: "node-1"}, nil
}

func (d *refDriver) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if d.fault == "hang" {
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

func (d *refDriver) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	isBlock := r.GetVolumeCapabilities()[0].GetBlock() != nil
	if d.fault == "secret_logged" {
		d.log.Info("creating volume", "name", r.GetName(), "secrets", r.GetSecrets())
	}
	if d.fault == "secret_logged_escaped" {
		// Only the values that escaping changes, so that no raw value
		// reaches the log: the escaped forms alone must be caught.
		for _, v := range r.GetSecrets() {
			if strconv.Quote(v) != `"`+v+`"` {
				d.log.Info("creating volume", "name", r.GetName(), "credential", fmt.Sprintf("%q", v))
			}
		}
	}
	if d.fault == "leaked_goroutine" {
		go func() { select {} }() // a background worker nobody stops
	}
	size := max(r.GetCapacityRange().GetRequiredBytes(), 1<<20)
	if size > refMaxBytes {
		return nil, status.Errorf(codes.OutOfRange, "capacity %d exceeds the %d bytes this driver serves", size, int64(refMaxBytes))
	}
	if lim := r.GetCapacityRange().GetLimitBytes(); lim > 0 && size > lim {
		size = lim
	}
	src := ""
	if s := r.GetVolumeContentSource().GetSnapshot(); s != nil {
		src = "snap:" + s.GetSnapshotId()
	}
	if v := r.GetVolumeContentSource().GetVolume(); v != nil {
		src = "vol:" + v.GetVolumeId()
	}
	id := hashID("v", r.GetName())
	switch d.fault {
	case "duplicate_on_retry":
		id = hashID("v", r.GetName()+time.Now().String())
	case "forget_on_restart":
		d.mu.Lock()
		if known, ok := d.names[r.GetName()]; ok {
			id = known
		} else {
			id = hashID("v", r.GetName()+d.gen)
			d.names[r.GetName()] = id
		}
		d.mu.Unlock()
	}
	resp := func(m refMeta) *csi.CreateVolumeResponse {
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: m.Capacity, ContentSource: r.GetVolumeContentSource()}}
	}
	if m, ok := readMeta(d.volDir(id)); ok {
		lim := r.GetCapacityRange().GetLimitBytes()
		if m.Capacity < r.GetCapacityRange().GetRequiredBytes() || (lim > 0 && m.Capacity > lim) || m.Source != src || m.Block != isBlock {
			return nil, status.Errorf(codes.AlreadyExists, "volume %q exists with other capacity or source", r.GetName())
		}
		return resp(m), nil
	}
	var from string
	switch {
	case strings.HasPrefix(src, "snap:"):
		sid := strings.TrimPrefix(src, "snap:")
		sm, ok := readMeta(d.snapDir(sid))
		if !safe(sid) || !ok {
			return nil, status.Errorf(codes.NotFound, "source snapshot %q not found", sid)
		}
		if sm.Block != isBlock {
			return nil, status.Errorf(codes.InvalidArgument, "source snapshot is block=%v, the volume block=%v", sm.Block, isBlock)
		}
		from = d.snapDir(sid)
	case strings.HasPrefix(src, "vol:"):
		vid := strings.TrimPrefix(src, "vol:")
		vm, err := d.volume(vid)
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "source volume %q not found", vid)
		}
		if vm.Block != isBlock {
			return nil, status.Errorf(codes.InvalidArgument, "source volume is block=%v, the volume block=%v", vm.Block, isBlock)
		}
		from = d.volDir(vid)
	}
	m := refMeta{Name: r.GetName(), Capacity: size, Source: src, Block: isBlock}
	if err := d.fill(d.volDir(id), from, m); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return resp(m), nil
}

func (d *refDriver) ValidateVolumeCapabilities(_ context.Context, r *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	vm, err := d.volume(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	for _, c := range r.GetVolumeCapabilities() {
		mode := c.GetAccessMode().GetMode()
		if (c.GetBlock() != nil) != vm.Block || (mode != csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER && mode != csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY) {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: "only mount volumes on a single node"}, nil
		}
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{VolumeCapabilities: r.GetVolumeCapabilities()}}, nil
}

func (d *refDriver) DeleteVolume(_ context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if _, err := d.volume(r.GetVolumeId()); err != nil {
		if d.fault == "wrong_code" {
			return nil, err
		}
		return &csi.DeleteVolumeResponse{}, nil
	}
	if _, err := os.Stat(d.stagedMark(r.GetVolumeId())); err == nil && d.fault != "delete_staged" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %q is staged on a node", r.GetVolumeId())
	}
	if m, _ := d.volume(r.GetVolumeId()); d.fault == "backend_leak" && len(m.Name) == 128 && !m.Block {
		// On one path only (mount volumes with the longest names), the
		// volume goes to a trash directory nothing ever empties.
		if err := os.MkdirAll(filepath.Join(d.dir, "trash"), 0o750); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		return &csi.DeleteVolumeResponse{}, os.Rename(d.volDir(r.GetVolumeId()), filepath.Join(d.dir, "trash", r.GetVolumeId()))
	}
	return &csi.DeleteVolumeResponse{}, os.RemoveAll(d.volDir(r.GetVolumeId()))
}

// page pages a sorted list of IDs by decimal index tokens.
func (d *refDriver) page(ids []string, token string, max int32) (out []string, next string, err error) {
	sort.Strings(ids)
	start := 0
	if token != "" {
		start, err = strconv.Atoi(token)
		if err != nil || start < 0 || start > len(ids) {
			return nil, "", status.Errorf(codes.Aborted, "starting_token %q is not a token this driver issued", token)
		}
	}
	end := len(ids)
	if max > 0 && start+int(max) < end {
		end = start + int(max)
		next = strconv.Itoa(end)
		if d.fault == "broken_pagination" {
			next = strconv.Itoa(end - 1)
		}
	}
	return ids[start:end], next, nil
}

func listIDs(dir string) []string {
	es, _ := os.ReadDir(dir)
	var ids []string
	for _, e := range es {
		if _, ok := readMeta(filepath.Join(dir, e.Name())); ok {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

func (d *refDriver) ListVolumes(_ context.Context, r *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	ids, next, err := d.page(listIDs(filepath.Join(d.dir, "vols")), r.GetStartingToken(), r.GetMaxEntries())
	if err != nil {
		return nil, err
	}
	resp := &csi.ListVolumesResponse{NextToken: next}
	for _, id := range ids {
		m, _ := readMeta(d.volDir(id))
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{VolumeId: id, CapacityBytes: m.Capacity}})
	}
	return resp, nil
}

func (d *refDriver) ControllerExpandVolume(_ context.Context, r *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	m, err := d.volume(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if req := r.GetCapacityRange().GetRequiredBytes(); req > refMaxBytes {
		return nil, status.Errorf(codes.OutOfRange, "capacity %d exceeds the %d bytes this driver serves", req, int64(refMaxBytes))
	}
	m.Capacity = max(m.Capacity, r.GetCapacityRange().GetRequiredBytes())
	if m.Block {
		if err := os.Truncate(d.img(r.GetVolumeId()), m.Capacity); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	if err := writeMeta(d.volDir(r.GetVolumeId()), m); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: m.Capacity}, nil
}

func (d *refDriver) CreateSnapshot(_ context.Context, r *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if _, err := d.volume(r.GetSourceVolumeId()); err != nil {
		return nil, err
	}
	id := hashID("s", r.GetName())
	resp := func(m refMeta) *csi.CreateSnapshotResponse {
		return &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{SnapshotId: id, SourceVolumeId: m.Source, CreationTime: timestamppb.New(time.Unix(0, m.Created)), ReadyToUse: true}}
	}
	if m, ok := readMeta(d.snapDir(id)); ok {
		if m.Source != r.GetSourceVolumeId() {
			return nil, status.Errorf(codes.AlreadyExists, "snapshot %q exists for another volume", r.GetName())
		}
		return resp(m), nil
	}
	src, _ := d.volume(r.GetSourceVolumeId())
	m := refMeta{Name: r.GetName(), Source: r.GetSourceVolumeId(), Created: time.Now().UnixNano(), Block: src.Block, Capacity: src.Capacity}
	if err := d.fill(d.snapDir(id), d.volDir(m.Source), m); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return resp(m), nil
}

func (d *refDriver) DeleteSnapshot(_ context.Context, r *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if !safe(r.GetSnapshotId()) {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	return &csi.DeleteSnapshotResponse{}, os.RemoveAll(d.snapDir(r.GetSnapshotId()))
}

func (d *refDriver) ListSnapshots(_ context.Context, r *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	var ids []string
	for _, id := range listIDs(filepath.Join(d.dir, "snaps")) {
		m, _ := readMeta(d.snapDir(id))
		if (r.GetSnapshotId() == "" || r.GetSnapshotId() == id) && (r.GetSourceVolumeId() == "" || r.GetSourceVolumeId() == m.Source) {
			ids = append(ids, id)
		}
	}
	ids, next, err := d.page(ids, r.GetStartingToken(), r.GetMaxEntries())
	if err != nil {
		return nil, err
	}
	resp := &csi.ListSnapshotsResponse{NextToken: next}
	for _, id := range ids {
		m, _ := readMeta(d.snapDir(id))
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: &csi.Snapshot{
			SnapshotId: id, SourceVolumeId: m.Source, CreationTime: timestamppb.New(time.Unix(0, m.Created)), ReadyToUse: true}})
	}
	return resp, nil
}
