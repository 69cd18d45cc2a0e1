package kube_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/sanity/kube"
)

const hostpathName = "hostpath.csikit.dev"

// TestHostpath drives the reference driver, examples/hostpath, served
// in-process on its own state directory, through the portable scenarios and
// a crash-restart while provisioning. What it received is read from a
// Recorder; what it holds from its ListVolumes.
func TestHostpath(t *testing.T) {
	start := time.Now()
	startPrereqs(t)
	state := t.TempDir()
	rec := &kube.Recorder{}
	var (
		mu  sync.Mutex
		cur *driver.Driver
	)
	closeCur := func() {
		mu.Lock()
		defer mu.Unlock()
		if cur != nil {
			if err := cur.Close(); err != nil {
				t.Errorf("close hostpath driver: %v", err)
			}
			cur = nil
		}
	}
	t.Cleanup(closeCur) // after ServeDriver's Cleanup has stopped serving
	newServer := func() (*csikit.Server, error) {
		closeCur() // a restart reopens the same state, as a new process would
		d, err := driver.New(context.Background(), driver.Options{StateDir: state, NodeID: "node-1", EnableAttach: true})
		if err != nil {
			return nil, err
		}
		mu.Lock()
		cur = d
		mu.Unlock()
		return csikit.NewServer(d, csikit.Options{
			Disable: driver.Options{EnableAttach: true}.Disabled(),
			Name:    hostpathName, Version: "v0.0.1-test", NodeID: "node-1",
			Topology:    map[string]string{driver.TopologyKey: "node-1"},
			VolumeModes: csikit.Mount | csikit.Block, AccessModes: driver.AccessModes(),
			Clone: true, SingleNodeMultiWriter: true, Alpha: true,
			Journal: d.Journal(), DrainTimeout: 100 * time.Millisecond,
			UnaryInterceptors: []grpc.UnaryServerInterceptor{rec.Interceptor()},
		})
	}
	drv := kube.ServeDriver(t, newServer)
	env := kube.Start(t, kube.Options{
		Endpoint: drv.Endpoint, DriverName: hostpathName,
		NodeName: "node-1", NodeTopology: map[string]string{driver.TopologyKey: "node-1"},
	})
	createNamespace(t, env)
	conn, err := grpc.NewClient(drv.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	obs := &recorded{rec: rec, ctl: csi.NewControllerClient(conn)}
	t.Logf("environment ready in %s", time.Since(start).Round(time.Millisecond))
	newH := func(t *testing.T) *h {
		return &h{t: t, env: env, ctx: context.Background(), zoneKey: driver.TopologyKey, zone: "node-1"}
	}

	t.Run("api", func(t *testing.T) {
		for _, sc := range apiScenarios {
			if sc.fakeOnly {
				continue
			}
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				sc.run(newH(t), obs)
			})
		}
	})
	t.Run("faults", func(t *testing.T) {
		t.Run("driver-restart-while-provisioning", func(t *testing.T) {
			h := newH(t)
			h.storageClass("restart", nil)
			names := []string{"restart-0", "restart-1", "restart-2", "restart-3"}
			for _, n := range names {
				h.pvc(n, "restart", "64Mi", nil)
			}
			kube.WaitFor(t, wait, "a CreateVolume", func(ctx context.Context) (bool, string, error) {
				return len(rec.Calls(csi.Controller_CreateVolume_FullMethodName)) > 0, "", nil
			})
			if err := drv.Stop(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
			if err := drv.Start(); err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				h.bound(n)
			}
			assertVolumesMatchPVs(h, obs)
		})
	})
}

// assertVolumesMatchPVs checks that the driver holds exactly one volume per
// CSI PV of the environment: no duplicate, no orphan, none missing.
func assertVolumesMatchPVs(h *h, o *recorded) {
	h.t.Helper()
	pvs, err := h.env.Client.CoreV1().PersistentVolumes().List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var handles []string
	for _, pv := range pvs.Items {
		if pv.Spec.CSI != nil && pv.Status.Phase != corev1.VolumeFailed {
			handles = append(handles, pv.Spec.CSI.VolumeHandle)
		}
	}
	ids, err := o.list(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	slices.Sort(handles)
	slices.Sort(ids)
	if !slices.Equal(handles, ids) {
		h.t.Errorf("driver volumes: got %v, want exactly the PV handles %v", ids, handles)
	}
}

// recorded is an observer over a Recorder and the driver's ListVolumes.
type recorded struct {
	rec *kube.Recorder
	ctl csi.ControllerClient
}

func (r *recorded) list(ctx context.Context) ([]string, error) {
	var ids []string
	req := &csi.ListVolumesRequest{}
	for {
		resp, err := r.ctl.ListVolumes(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("ListVolumes: %w", err)
		}
		for _, e := range resp.GetEntries() {
			ids = append(ids, e.GetVolume().GetVolumeId())
		}
		if resp.GetNextToken() == "" {
			return ids, nil
		}
		req.StartingToken = resp.GetNextToken()
	}
}

func calls[T any](r *kube.Recorder, method string, keep func(T) bool) []T {
	var out []T
	for _, c := range r.Calls(method) {
		if m, ok := c.Request.(T); ok && keep(m) {
			out = append(out, m)
		}
	}
	return out
}

func (r *recorded) createsNamed(name string) []*csi.CreateVolumeRequest {
	return calls(r.rec, csi.Controller_CreateVolume_FullMethodName, func(m *csi.CreateVolumeRequest) bool { return m.GetName() == name })
}

func (r *recorded) volume(id string) *csi.Volume {
	resp, err := r.ctl.ListVolumes(context.Background(), &csi.ListVolumesRequest{})
	if err != nil {
		return nil
	}
	for _, e := range resp.GetEntries() {
		if e.GetVolume().GetVolumeId() == id {
			return e.GetVolume()
		}
	}
	return nil
}

func (r *recorded) deleted(id string) bool {
	for _, c := range r.rec.Calls(csi.Controller_DeleteVolume_FullMethodName) {
		if c.Err == nil && c.Request.(*csi.DeleteVolumeRequest).GetVolumeId() == id {
			return true
		}
	}
	return false
}

func (r *recorded) snapshotsOf(volID string) []*csi.CreateSnapshotRequest {
	return calls(r.rec, csi.Controller_CreateSnapshot_FullMethodName, func(m *csi.CreateSnapshotRequest) bool { return m.GetSourceVolumeId() == volID })
}

func (r *recorded) expandsOf(id string) []*csi.ControllerExpandVolumeRequest {
	return calls(r.rec, csi.Controller_ControllerExpandVolume_FullMethodName, func(m *csi.ControllerExpandVolumeRequest) bool { return m.GetVolumeId() == id })
}

func (r *recorded) publishesOf(id string) ([]*csi.ControllerPublishVolumeRequest, []*csi.ControllerUnpublishVolumeRequest) {
	return calls(r.rec, csi.Controller_ControllerPublishVolume_FullMethodName, func(m *csi.ControllerPublishVolumeRequest) bool { return m.GetVolumeId() == id }),
		calls(r.rec, csi.Controller_ControllerUnpublishVolume_FullMethodName, func(m *csi.ControllerUnpublishVolumeRequest) bool { return m.GetVolumeId() == id })
}

func (r *recorded) publishContext(id string) map[string]string {
	cs := r.rec.Calls(csi.Controller_ControllerPublishVolume_FullMethodName)
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Err == nil && cs[i].Request.(*csi.ControllerPublishVolumeRequest).GetVolumeId() == id {
			return cs[i].Response.(*csi.ControllerPublishVolumeResponse).GetPublishContext()
		}
	}
	return nil
}

func (r *recorded) expandNeedsNode(id string) bool {
	cs := r.rec.Calls(csi.Controller_ControllerExpandVolume_FullMethodName)
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Err == nil && cs[i].Request.(*csi.ControllerExpandVolumeRequest).GetVolumeId() == id {
			return cs[i].Response.(*csi.ControllerExpandVolumeResponse).GetNodeExpansionRequired()
		}
	}
	return false
}
