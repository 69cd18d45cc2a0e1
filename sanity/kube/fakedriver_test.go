package kube_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/journal"
)

// fakeDriver is an in-memory controller plugin whose backend outlives its
// Server, so that stopping and restarting the Server is a driver crash with
// the storage intact. It records every request it gets. StorageClass
// parameters steer it: "delay" (a Go duration the first CreateVolume of a
// name sleeps, after creating the backend volume), "abort" (how many
// CreateVolume calls of a name answer Aborted first), "nodeExpansion"
// ("true": ControllerExpandVolume asks for the node step).
type fakeDriver struct {
	journal *journal.Memory

	mu        sync.Mutex
	volumes   map[string]*csi.Volume // backend, by ID
	snapshots map[string]*csi.Snapshot
	creates   []*csi.CreateVolumeRequest
	deletes   []string
	publishes []*csi.ControllerPublishVolumeRequest
	unpubs    []*csi.ControllerUnpublishVolumeRequest
	expands   []*csi.ControllerExpandVolumeRequest
	snapCalls []*csi.CreateSnapshotRequest
	calls     map[string]int // CreateVolume calls by name
}

func newFakeDriver() *fakeDriver {
	return &fakeDriver{
		journal:   journal.NewMemory(),
		volumes:   map[string]*csi.Volume{},
		snapshots: map[string]*csi.Snapshot{},
		calls:     map[string]int{},
	}
}

const fakeDriverName = "fake.csikit.example"

// server builds a fresh Server over the same backend and journal.
func (d *fakeDriver) server() (*csikit.Server, error) {
	return csikit.NewServer(d, csikit.Options{
		Name: fakeDriverName, Version: "v0.0.1-test",
		AccessibilityConstraints: true,
		Clone:                    true,
		SingleNodeMultiWriter:    true,
		Alpha:                    true,
		Journal:                  d.journal,
		DrainTimeout:             100 * time.Millisecond,
	})
}

func (d *fakeDriver) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	id, ok := journal.ReservedID(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no reserved ID: the journal is off")
	}
	p := req.GetParameters()
	d.mu.Lock()
	d.creates = append(d.creates, req)
	d.calls[req.GetName()]++
	n := d.calls[req.GetName()]
	if a, _ := strconv.Atoi(p["abort"]); n <= a {
		d.mu.Unlock()
		return nil, status.Errorf(codes.Aborted, "call %d of %d for %s aborted on purpose", n, a, req.GetName())
	}
	vol, exists := d.volumes[id]
	if !exists {
		size := req.GetCapacityRange().GetRequiredBytes()
		if size == 0 {
			size = 1 << 30
		}
		vol = &csi.Volume{VolumeId: id, CapacityBytes: size, ContentSource: req.GetVolumeContentSource(),
			VolumeContext: map[string]string{"name": req.GetName(), "nodeExpansion": p["nodeExpansion"]}}
		if src := req.GetVolumeContentSource(); src != nil {
			if s := src.GetSnapshot(); s != nil && d.snapshots[s.GetSnapshotId()] == nil {
				d.mu.Unlock()
				return nil, status.Errorf(codes.NotFound, "snapshot %s not found", s.GetSnapshotId())
			}
			if v := src.GetVolume(); v != nil && d.volumes[v.GetVolumeId()] == nil {
				d.mu.Unlock()
				return nil, status.Errorf(codes.NotFound, "volume %s not found", v.GetVolumeId())
			}
		}
		if tr := req.GetAccessibilityRequirements(); tr != nil {
			if pref := tr.GetPreferred(); len(pref) > 0 {
				vol.AccessibleTopology = []*csi.Topology{pref[0]}
			} else if reqd := tr.GetRequisite(); len(reqd) > 0 {
				vol.AccessibleTopology = []*csi.Topology{reqd[0]}
			}
		}
		d.volumes[id] = vol
	}
	d.mu.Unlock()
	if delay, err := time.ParseDuration(p["delay"]); err == nil && !exists {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return &csi.CreateVolumeResponse{Volume: vol}, nil
}

func (d *fakeDriver) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deletes = append(d.deletes, req.GetVolumeId())
	delete(d.volumes, req.GetVolumeId())
	return &csi.DeleteVolumeResponse{}, nil
}

// LookupVolume lets csikit answer ValidateVolumeCapabilities (required of
// every controller) from the backend map.
func (d *fakeDriver) LookupVolume(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.volumes[id] == nil {
		return status.Errorf(codes.NotFound, "volume %q not found", id)
	}
	return nil
}

func (d *fakeDriver) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.publishes = append(d.publishes, req)
	if d.volumes[req.GetVolumeId()] == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"device": "/dev/fake-" + req.GetNodeId()}}, nil
}

func (d *fakeDriver) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.unpubs = append(d.unpubs, req)
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (d *fakeDriver) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expands = append(d.expands, req)
	v := d.volumes[req.GetVolumeId()]
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", req.GetVolumeId())
	}
	if n := req.GetCapacityRange().GetRequiredBytes(); n > v.CapacityBytes {
		v.CapacityBytes = n
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: v.CapacityBytes,
		NodeExpansionRequired: v.VolumeContext["nodeExpansion"] == "true"}, nil
}

func (d *fakeDriver) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	id, ok := journal.ReservedID(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no reserved ID: the journal is off")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.snapCalls = append(d.snapCalls, req)
	src := d.volumes[req.GetSourceVolumeId()]
	if src == nil {
		return nil, status.Errorf(codes.NotFound, "source volume %s not found", req.GetSourceVolumeId())
	}
	s := d.snapshots[id]
	if s == nil {
		s = &csi.Snapshot{SnapshotId: id, SourceVolumeId: src.VolumeId, SizeBytes: src.CapacityBytes, ReadyToUse: true}
		d.snapshots[id] = s
	}
	return &csi.CreateSnapshotResponse{Snapshot: s}, nil
}

func (d *fakeDriver) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.snapshots, req.GetSnapshotId())
	return &csi.DeleteSnapshotResponse{}, nil
}

// createsNamed returns the CreateVolume requests for PV name.
func (d *fakeDriver) createsNamed(name string) []*csi.CreateVolumeRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*csi.CreateVolumeRequest
	for _, r := range d.creates {
		if r.GetName() == name {
			out = append(out, r)
		}
	}
	return out
}

// volumesNamed counts backend volumes created for PV name.
func (d *fakeDriver) volumesNamed(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, v := range d.volumes {
		if v.VolumeContext["name"] == name {
			n++
		}
	}
	return n
}

func (d *fakeDriver) volume(id string) *csi.Volume {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.volumes[id]
}

func (d *fakeDriver) deleted(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, x := range d.deletes {
		if x == id {
			return true
		}
	}
	return false
}

func (d *fakeDriver) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return fmt.Sprintf("fakeDriver{volumes: %d, snapshots: %d, creates: %d}", len(d.volumes), len(d.snapshots), len(d.creates))
}

// createsWith returns the CreateVolume requests carrying parameter key.
func (d *fakeDriver) createsWith(key string) []*csi.CreateVolumeRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*csi.CreateVolumeRequest
	for _, r := range d.creates {
		if _, ok := r.GetParameters()[key]; ok {
			out = append(out, r)
		}
	}
	return out
}

func (d *fakeDriver) publishesOf(id string) (pub []*csi.ControllerPublishVolumeRequest, unpub []*csi.ControllerUnpublishVolumeRequest) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.publishes {
		if r.GetVolumeId() == id {
			pub = append(pub, r)
		}
	}
	for _, r := range d.unpubs {
		if r.GetVolumeId() == id {
			unpub = append(unpub, r)
		}
	}
	return pub, unpub
}

func (d *fakeDriver) expandsOf(id string) []*csi.ControllerExpandVolumeRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*csi.ControllerExpandVolumeRequest
	for _, r := range d.expands {
		if r.GetVolumeId() == id {
			out = append(out, r)
		}
	}
	return out
}

func (d *fakeDriver) snapshotsOf(volID string) []*csi.CreateSnapshotRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*csi.CreateSnapshotRequest
	for _, r := range d.snapCalls {
		if r.GetSourceVolumeId() == volID {
			out = append(out, r)
		}
	}
	return out
}

func (d *fakeDriver) publishContext(id string) map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := len(d.publishes) - 1; i >= 0; i-- {
		if r := d.publishes[i]; r.GetVolumeId() == id {
			return map[string]string{"device": "/dev/fake-" + r.GetNodeId()}
		}
	}
	return nil
}

func (d *fakeDriver) expandNeedsNode(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.volumes[id]
	return v != nil && v.VolumeContext["nodeExpansion"] == "true"
}
