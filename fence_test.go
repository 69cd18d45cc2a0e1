package csikit_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/locks"
)

// fenceDriver is a controller that attaches volumes and fences nodes. A
// node holds a volume from its publish until it is fenced; holdsAfter
// makes it hold on after a clean unpublish (the hung node).
type fenceDriver struct {
	mu         sync.Mutex
	holds      map[string]bool // vol/node → may still write
	fenced     map[string]bool
	calls      []string // "holds vol node", "fence vol node", "unfence vol node"
	holdsAfter bool     // a node keeps holding the volume after unpublish
	fenceErr   error
	holdsErr   error
	// inUnpublish, when set, receives a value when the driver's
	// ControllerUnpublishVolume starts and waits for release.
	inUnpublish chan struct{}
	release     chan struct{}
}

func newFenceDriver() *fenceDriver {
	return &fenceDriver{holds: map[string]bool{}, fenced: map[string]bool{}}
}

func (d *fenceDriver) LookupVolume(context.Context, string) error { return nil }

func (d *fenceDriver) ControllerPublishVolume(_ context.Context, r *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.holds[r.GetVolumeId()+"/"+r.GetNodeId()] = true
	return &csi.ControllerPublishVolumeResponse{}, nil
}

func (d *fenceDriver) ControllerUnpublishVolume(_ context.Context, r *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if d.inUnpublish != nil {
		d.inUnpublish <- struct{}{}
		<-d.release
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.holdsAfter {
		delete(d.holds, r.GetVolumeId()+"/"+r.GetNodeId())
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (d *fenceDriver) Holds(_ context.Context, vol, node string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "holds "+vol+" "+node)
	if d.holdsErr != nil {
		return false, d.holdsErr
	}
	return d.holds[vol+"/"+node], nil
}

func (d *fenceDriver) Fence(_ context.Context, vol, node string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "fence "+vol+" "+node)
	if d.fenceErr != nil {
		return d.fenceErr
	}
	d.fenced[vol+"/"+node] = true
	delete(d.holds, vol+"/"+node)
	return nil
}

func (d *fenceDriver) Unfence(_ context.Context, vol, node string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, "unfence "+vol+" "+node)
	delete(d.fenced, vol+"/"+node)
	return nil
}

func (d *fenceDriver) takeCalls() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := strings.Join(d.calls, ", ")
	d.calls = nil
	return s
}

func (d *fenceDriver) set(f func(*fenceDriver)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

func publishReq(vol, node string) *csi.ControllerPublishVolumeRequest {
	return &csi.ControllerPublishVolumeRequest{VolumeId: vol, NodeId: node, VolumeCapability: &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
}

func unpublishReq(vol, node string) *csi.ControllerUnpublishVolumeRequest {
	return &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: node}
}

func fencedGauge(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "csikit_fenced_nodes" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no csikit_fenced_nodes gauge")
	return 0
}

// The whole lifecycle: a node that still holds the volume at unpublish
// is fenced before the answer, refused at publish until unfenced, and
// counted in the gauge; a node that let go is not fenced.
func TestFenceAtUnpublish(t *testing.T) {
	ctx := context.Background()
	d := newFenceDriver()
	reg := prometheus.NewPedanticRegistry()
	s := serve(t, d, csikit.Options{Journal: journal.NewMemory(), Registry: reg})
	c := s.controller()

	// A clean detach: the node let go, nothing is fenced.
	if _, err := c.ControllerPublishVolume(ctx, publishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ControllerUnpublishVolume(ctx, unpublishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	if got := d.takeCalls(); got != "holds vol-1 node-a" {
		t.Fatalf("clean detach: got calls %q, want only Holds", got)
	}

	// A hung node: it still holds the volume after the driver's unpublish.
	d.set(func(d *fenceDriver) { d.holdsAfter = true })
	if _, err := c.ControllerPublishVolume(ctx, publishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ControllerUnpublishVolume(ctx, unpublishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	if got := d.takeCalls(); got != "holds vol-1 node-a, fence vol-1 node-a" {
		t.Fatalf("hung node: got calls %q, want Holds then Fence", got)
	}
	if g := fencedGauge(t, reg); g != 1 {
		t.Fatalf("csikit_fenced_nodes = %v, want 1", g)
	}
	// A retry of the unpublish (the CO lost the answer) is OK and does
	// not fence again: the journal says it is done.
	if _, err := c.ControllerUnpublishVolume(ctx, unpublishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	if got := d.takeCalls(); got != "" {
		t.Fatalf("retried unpublish of a fenced pair: got calls %q, want none", got)
	}

	// The fenced node is refused; another node is not.
	_, err := c.ControllerPublishVolume(ctx, publishReq("vol-1", "node-a"))
	st := testenv.WantCode(t, err, codes.FailedPrecondition)
	if !strings.Contains(st.Message(), "fenced") || !strings.Contains(st.Message(), "Unfence") {
		t.Fatalf("publish to a fenced node: message %q should say it is fenced and how to lift it", st.Message())
	}
	if _, err := c.ControllerPublishVolume(ctx, publishReq("vol-1", "node-b")); err != nil {
		t.Fatalf("publish to another node: %v", err)
	}
	if _, err := c.ControllerPublishVolume(ctx, publishReq("vol-2", "node-a")); err != nil {
		t.Fatalf("publish of another volume to the fenced node: %v", err)
	}

	fns, err := s.srv.FencedNodes(ctx)
	if err != nil || len(fns) != 1 || fns[0].VolumeID != "vol-1" || fns[0].NodeID != "node-a" || !fns[0].Done || fns[0].Since.IsZero() {
		t.Fatalf("FencedNodes = %+v, %v; want vol-1/node-a done", fns, err)
	}

	// The admin lifts the fence: the node may publish again.
	if err := s.srv.Unfence(ctx, "vol-1", "node-a"); err != nil {
		t.Fatal(err)
	}
	if got := d.takeCalls(); got != "unfence vol-1 node-a" {
		t.Fatalf("Unfence: got calls %q", got)
	}
	if err := s.srv.Unfence(ctx, "vol-1", "node-a"); err != nil {
		t.Fatalf("second Unfence: %v, want nil (idempotent)", err)
	}
	if g := fencedGauge(t, reg); g != 0 {
		t.Fatalf("csikit_fenced_nodes after Unfence = %v, want 0", g)
	}
	if fns, err := s.srv.FencedNodes(ctx); err != nil || len(fns) != 0 {
		t.Fatalf("FencedNodes after Unfence = %+v, %v", fns, err)
	}
	d.set(func(d *fenceDriver) { d.holdsAfter = false })
	if _, err := c.ControllerUnpublishVolume(ctx, unpublishReq("vol-1", "node-b")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ControllerPublishVolume(ctx, publishReq("vol-1", "node-a")); err != nil {
		t.Fatalf("publish after Unfence: %v", err)
	}
}

// A Fence that fails never lets the unpublish answer OK; the volume is
// not published elsewhere meanwhile; the retry fences even though Holds
// may no longer see the node, because the journal says fencing began.
func TestFenceFailureNeverAnswersOK(t *testing.T) {
	ctx := context.Background()
	d := newFenceDriver()
	d.holdsAfter = true
	d.fenceErr = fmt.Errorf("monitors unreachable")
	s := serve(t, d, csikit.Options{Journal: journal.NewMemory()})
	c := s.controller()
	if _, err := c.ControllerPublishVolume(ctx, publishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		_, err := c.ControllerUnpublishVolume(ctx, unpublishReq("vol-1", "node-a"))
		st := testenv.WantCode(t, err, codes.Unavailable)
		if !strings.Contains(st.Message(), "could not be fenced") || !strings.Contains(st.Message(), "monitors unreachable") {
			t.Fatalf("message %q should say the node could not be fenced, and why", st.Message())
		}
	}
	_, err := c.ControllerPublishVolume(ctx, publishReq("vol-1", "node-b"))
	testenv.WantCode(t, err, codes.Unavailable)
	fns, err := s.srv.FencedNodes(ctx)
	if err != nil || len(fns) != 1 || fns[0].Done {
		t.Fatalf("FencedNodes = %+v, %v; want vol-1/node-a not done", fns, err)
	}
	d.takeCalls()

	// The node's access went away by itself (Holds false) but the fence
	// is not confirmed: the retry fences anyway.
	d.set(func(d *fenceDriver) { d.fenceErr = nil; delete(d.holds, "vol-1/node-a") })
	if _, err := c.ControllerUnpublishVolume(ctx, unpublishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	if got := d.takeCalls(); got != "fence vol-1 node-a" {
		t.Fatalf("retry: got calls %q, want Fence without asking Holds", got)
	}
	if _, err := c.ControllerPublishVolume(ctx, publishReq("vol-1", "node-b")); err != nil {
		t.Fatal(err)
	}

	// Holds failing is no answer either.
	d.set(func(d *fenceDriver) { d.holdsErr = fmt.Errorf("watchers unreadable") })
	_, err = c.ControllerUnpublishVolume(ctx, unpublishReq("vol-1", "node-b"))
	st := testenv.WantCode(t, err, codes.Unavailable)
	if !strings.Contains(st.Message(), "watchers unreadable") {
		t.Fatalf("message %q should carry Holds' error", st.Message())
	}
}

// Fenced nodes are remembered across a controller restart: the journal
// file has them, the gauge counts them at start, publish refuses them.
func TestFencedNodesSurviveRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := journal.OpenFile(path, journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d := newFenceDriver()
	d.holdsAfter = true
	s := serve(t, d, csikit.Options{Journal: j})
	for _, n := range []string{"node-a", "node:b"} {
		if _, err := s.controller().ControllerPublishVolume(ctx, publishReq("vol-1", n)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.controller().ControllerUnpublishVolume(ctx, unpublishReq("vol-1", n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	j2, err := journal.OpenFile(path, journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	reg := prometheus.NewPedanticRegistry()
	s2 := serve(t, newFenceDriver(), csikit.Options{Journal: j2, Registry: reg})
	if g := fencedGauge(t, reg); g != 2 {
		t.Fatalf("csikit_fenced_nodes after restart = %v, want 2", g)
	}
	fns, err := s2.srv.FencedNodes(ctx)
	if err != nil || len(fns) != 2 || fns[0].NodeID != "node-a" || fns[1].NodeID != "node:b" {
		t.Fatalf("FencedNodes after restart = %+v, %v", fns, err)
	}
	_, err = s2.controller().ControllerPublishVolume(ctx, publishReq("vol-1", "node-a"))
	testenv.WantCode(t, err, codes.FailedPrecondition)
	if err := s2.srv.Unfence(ctx, "vol-1", "node-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.controller().ControllerPublishVolume(ctx, publishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP csikit_fenced_nodes Volume/node pairs the driver fenced (or is fencing) at ControllerUnpublishVolume and that no admin has unfenced yet; read from the journal at start.
# TYPE csikit_fenced_nodes gauge
csikit_fenced_nodes{driver_name="test.csikit.dev"} 1
`), "csikit_fenced_nodes"); err != nil {
		t.Fatal(err)
	}
}

// Fencing runs under the volume's lock: a publish or an Unfence of the
// same volume while an unpublish runs is Aborted, another volume is not.
func TestFenceHoldsTheVolumeLock(t *testing.T) {
	ctx := context.Background()
	d := newFenceDriver()
	d.holdsAfter = true
	d.inUnpublish, d.release = make(chan struct{}), make(chan struct{})
	s := serve(t, d, csikit.Options{Journal: journal.NewMemory()})
	c := s.controller()
	if _, err := c.ControllerPublishVolume(ctx, publishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.ControllerUnpublishVolume(ctx, unpublishReq("vol-1", "node-a"))
		done <- err
	}()
	<-d.inUnpublish
	_, err := c.ControllerPublishVolume(ctx, publishReq("vol-1", "node-b"))
	testenv.WantCode(t, err, codes.Aborted)
	testenv.WantCode(t, s.srv.Unfence(ctx, "vol-1", "node-a"), codes.Aborted)
	if _, err := c.ControllerPublishVolume(ctx, publishReq("vol-2", "node-b")); err != nil {
		t.Fatalf("publish of another volume: %v", err)
	}
	close(d.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := d.takeCalls(); got != "holds vol-1 node-a, fence vol-1 node-a" {
		t.Fatalf("calls %q", got)
	}
}

// An unpublish from every node (no node ID) asks Holds and Fence with ""
// and does not block the publish that follows.
func TestFenceUnpublishFromEveryNode(t *testing.T) {
	ctx := context.Background()
	d := newFenceDriver()
	s := serve(t, d, csikit.Options{Journal: journal.NewMemory()})
	c := s.controller()
	d.set(func(d *fenceDriver) { d.holds["vol-1/"] = true; d.holdsAfter = true })
	if _, err := c.ControllerUnpublishVolume(ctx, unpublishReq("vol-1", "")); err != nil {
		t.Fatal(err)
	}
	if got := d.takeCalls(); got != "holds vol-1 , fence vol-1 " {
		t.Fatalf("calls %q", got)
	}
	if _, err := c.ControllerPublishVolume(ctx, publishReq("vol-1", "node-b")); err != nil {
		t.Fatal(err)
	}
}

// fenceOnly fences but does not publish.
type fenceOnly struct{}

func (fenceOnly) LookupVolume(context.Context, string) error { return nil }
func (fenceOnly) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}
func (fenceOnly) CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return &csi.CreateVolumeResponse{}, nil
}
func (fenceOnly) Holds(context.Context, string, string) (bool, error) { return false, nil }
func (fenceOnly) Fence(context.Context, string, string) error         { return nil }
func (fenceOnly) Unfence(context.Context, string, string) error       { return nil }

// oldJournal is a journal of a driver's own that knows only the kinds
// of v0.1.0.
type oldJournal struct{ *journal.Memory }

func (j oldJournal) LookupName(ctx context.Context, kind journal.Kind, name string) (journal.Record, bool, error) {
	if kind > journal.KindGroupSnapshot {
		return journal.Record{}, false, statusErr(codes.InvalidArgument, fmt.Sprintf("journal: unknown kind %d", kind))
	}
	return j.Memory.LookupName(ctx, kind, name)
}

func TestNewServerRefusesAnIncompleteFencer(t *testing.T) {
	base := csikit.Options{Name: "fence.csikit.dev", Version: "v1", Journal: journal.NewMemory()}
	oldKinds := base
	oldKinds.Journal = oldJournal{journal.NewMemory()}
	noJournal := base
	noJournal.Journal = nil
	noLocks := base
	noLocks.LockKeys = map[string]locks.KeyFunc{csi.Controller_ControllerUnpublishVolume_FullMethodName: nil}
	noPublish := base
	noPublish.Disable = []reflect.Type{reflect.TypeFor[csikit.ControllerPublisher]()}
	for _, c := range []struct {
		name   string
		driver any
		opts   csikit.Options
		want   string
	}{
		{"no ControllerPublisher", fenceOnly{}, base, "does not serve ControllerPublishVolume"},
		{"ControllerPublisher disabled", newFenceDriver(), noPublish, "does not serve ControllerPublishVolume"},
		{"no journal", newFenceDriver(), noJournal, "Options.Journal is nil"},
		{"no locks", newFenceDriver(), noLocks, "turns locking off"},
		{"journal without the fence kind", newFenceDriver(), oldKinds, "refuses journal.KindFence records (journal: unknown kind 4)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := csikit.NewServer(c.driver, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewServer: %v, want an error saying %q", err, c.want)
			}
		})
	}
	// Disabling the Fencer too makes it an ordinary controller.
	ok := noPublish
	ok.Disable = append(ok.Disable, reflect.TypeFor[csikit.Fencer]())
	if _, err := csikit.NewServer(fenceOnly{}, ok); err != nil {
		t.Fatalf("NewServer with Fencer disabled: %v", err)
	}
	// Without a Fencer, the fencing methods say so.
	plain := noJournal
	plain.NodeID = "node-a"
	srv, err := csikit.NewServer(&nodeDriver{}, plain)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WantCode(t, srv.Unfence(context.Background(), "v", "n"), codes.FailedPrecondition)
	_, err = srv.FencedNodes(context.Background())
	testenv.WantCode(t, err, codes.FailedPrecondition)
}

// The fencing service on the driver's endpoint lists and lifts fences,
// through the server's interceptors.
func TestFencingService(t *testing.T) {
	ctx := context.Background()
	d := newFenceDriver()
	d.holdsAfter = true
	s := serve(t, d, csikit.Options{Journal: journal.NewMemory()})
	if _, err := s.controller().ControllerPublishVolume(ctx, publishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.controller().ControllerUnpublishVolume(ctx, unpublishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	list := new(structpb.Struct)
	if err := s.conn.Invoke(ctx, "/"+csikit.FencingService+"/List", &emptypb.Empty{}, list); err != nil {
		t.Fatal(err)
	}
	fenced := list.GetFields()["fenced"].GetListValue().GetValues()
	if len(fenced) != 1 || !list.GetFields()["complete"].GetBoolValue() {
		t.Fatalf("List = %v, want one complete entry", list)
	}
	e := fenced[0].GetStructValue().GetFields()
	if e["volume_id"].GetStringValue() != "vol-1" || e["node_id"].GetStringValue() != "node-a" || !e["done"].GetBoolValue() || e["since"].GetStringValue() == "" {
		t.Fatalf("List entry = %v", e)
	}
	bad, _ := structpb.NewStruct(map[string]any{"node_id": "node-a"})
	err := s.conn.Invoke(ctx, "/"+csikit.FencingService+"/Unfence", bad, &emptypb.Empty{})
	testenv.WantCode(t, err, codes.InvalidArgument)
	req, _ := structpb.NewStruct(map[string]any{"volume_id": "vol-1", "node_id": "node-a"})
	if err := s.conn.Invoke(ctx, "/"+csikit.FencingService+"/Unfence", req, &emptypb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.controller().ControllerPublishVolume(ctx, publishReq("vol-1", "node-a")); err != nil {
		t.Fatalf("publish after Unfence through the service: %v", err)
	}
}

// flakyCommit fails the first commit of a fence record.
type flakyCommit struct {
	*journal.Memory
	mu     sync.Mutex
	failed bool
}

func (j *flakyCommit) Commit(ctx context.Context, kind journal.Kind, name, id string, resp []byte) error {
	j.mu.Lock()
	fail := kind == journal.KindFence && !j.failed
	j.failed = j.failed || fail
	j.mu.Unlock()
	if fail {
		return statusErr(codes.Unavailable, "journal: disk went away")
	}
	return j.Memory.Commit(ctx, kind, name, id, resp)
}

// A fence done but not recorded is no OK either: the retry fences again
// (idempotent) and records it.
func TestFenceNotRecordedIsRetried(t *testing.T) {
	ctx := context.Background()
	d := newFenceDriver()
	d.holdsAfter = true
	s := serve(t, d, csikit.Options{Journal: &flakyCommit{Memory: journal.NewMemory()}})
	c := s.controller()
	if _, err := c.ControllerPublishVolume(ctx, publishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	_, err := c.ControllerUnpublishVolume(ctx, unpublishReq("vol-1", "node-a"))
	st := testenv.WantCode(t, err, codes.Unavailable)
	if !strings.Contains(st.Message(), "cannot record it") {
		t.Fatalf("message %q", st.Message())
	}
	if _, err := c.ControllerUnpublishVolume(ctx, unpublishReq("vol-1", "node-a")); err != nil {
		t.Fatal(err)
	}
	if got := d.takeCalls(); got != "holds vol-1 node-a, fence vol-1 node-a, fence vol-1 node-a" {
		t.Fatalf("calls %q, want Holds once and Fence twice", got)
	}
	fns, err := s.srv.FencedNodes(ctx)
	if err != nil || len(fns) != 1 || !fns[0].Done {
		t.Fatalf("FencedNodes = %+v, %v", fns, err)
	}
}
