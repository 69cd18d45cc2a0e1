package idempotency_test

import (
	"context"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/idempotency"
	"github.com/csikit/csikit/locks"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type rpc struct {
	method string
	req    any
}

var (
	mNodePublish   = csi.Node_NodePublishVolume_FullMethodName
	mNodeUnpublish = csi.Node_NodeUnpublishVolume_FullMethodName
	mSnap          = csi.Controller_CreateSnapshot_FullMethodName
	mDelSnap       = csi.Controller_DeleteSnapshot_FullMethodName
	mExpand        = csi.Controller_ControllerExpandVolume_FullMethodName
	mPublish       = csi.Controller_ControllerPublishVolume_FullMethodName
)

func createVol(name string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}}
}

func cloneVol(name, src string) *csi.CreateVolumeRequest {
	r := createVol(name)
	r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src}}}
	return r
}

func restoreVol(name, snap string) *csi.CreateVolumeRequest {
	r := createVol(name)
	r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap}}}
	return r
}

func TestKeyRules(t *testing.T) {
	var (
		create  = func(n string) rpc { return rpc{mCreate, createVol(n)} }
		del     = func(v string) rpc { return rpc{mDelete, &csi.DeleteVolumeRequest{VolumeId: v}} }
		publish = func(v string) rpc {
			return rpc{mPublish, &csi.ControllerPublishVolumeRequest{VolumeId: v, NodeId: "n"}}
		}
		unpublish  = rpc{csi.Controller_ControllerUnpublishVolume_FullMethodName, &csi.ControllerUnpublishVolumeRequest{VolumeId: "v"}}
		expand     = func(v string) rpc { return rpc{mExpand, &csi.ControllerExpandVolumeRequest{VolumeId: v}} }
		modify     = rpc{csi.Controller_ControllerModifyVolume_FullMethodName, &csi.ControllerModifyVolumeRequest{VolumeId: "v"}}
		stage      = rpc{csi.Node_NodeStageVolume_FullMethodName, &csi.NodeStageVolumeRequest{VolumeId: "v", StagingTargetPath: "/s"}}
		unstage    = rpc{csi.Node_NodeUnstageVolume_FullMethodName, &csi.NodeUnstageVolumeRequest{VolumeId: "v", StagingTargetPath: "/s"}}
		nodeExpand = rpc{csi.Node_NodeExpandVolume_FullMethodName, &csi.NodeExpandVolumeRequest{VolumeId: "v", VolumePath: "/p"}}
		nodePub    = func(v, p string) rpc {
			return rpc{mNodePublish, &csi.NodePublishVolumeRequest{VolumeId: v, TargetPath: p}}
		}
		nodeUnpub = func(v, p string) rpc {
			return rpc{mNodeUnpublish, &csi.NodeUnpublishVolumeRequest{VolumeId: v, TargetPath: p}}
		}
		snap      = func(n, v string) rpc { return rpc{mSnap, &csi.CreateSnapshotRequest{Name: n, SourceVolumeId: v}} }
		delSnap   = func(s string) rpc { return rpc{mDelSnap, &csi.DeleteSnapshotRequest{SnapshotId: s}} }
		clone     = func(n, v string) rpc { return rpc{mCreate, cloneVol(n, v)} }
		restore   = func(n, s string) rpc { return rpc{mCreate, restoreVol(n, s)} }
		validate  = rpc{csi.Controller_ValidateVolumeCapabilities_FullMethodName, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "v"}}
		groupSnap = func(n string, v ...string) rpc {
			return rpc{csi.GroupController_CreateVolumeGroupSnapshot_FullMethodName, &csi.CreateVolumeGroupSnapshotRequest{Name: n, SourceVolumeIds: v}}
		}
		delGroup    = rpc{csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "g", SnapshotIds: []string{"s1", "s2", "s1"}}}
		conflict    = true
		noConflict  = false
		sourceSpace = locks.SpaceSourceVolume
	)
	cases := []struct {
		name          string
		first, second rpc
		want          bool
		space         string // the space named in the conflict message
	}{
		{"create same name", create("n"), create("n"), conflict, locks.SpaceVolumeName},
		{"create other name", create("n"), create("m"), noConflict, ""},
		{"delete vs publish", del("v"), publish("v"), conflict, locks.SpaceVolume},
		{"publish vs publish other volume", publish("v"), publish("w"), noConflict, ""},
		{"unpublish vs stage", unpublish, stage, conflict, locks.SpaceVolume},
		{"expand vs modify", expand("v"), modify, conflict, locks.SpaceVolume},
		{"stage vs unstage", stage, unstage, conflict, locks.SpaceVolume},
		{"node expand vs node publish", nodeExpand, nodePub("v", "/t"), conflict, locks.SpaceVolume},
		{"node publish vs unpublish", nodePub("v", "/t"), nodeUnpub("v", "/t"), conflict, locks.SpaceVolume},
		{"node publish same path other volume", nodePub("v", "/t"), nodeUnpub("w", "/t"), conflict, locks.SpacePath},
		{"node publish two paths", nodePub("v", "/t1"), nodePub("w", "/t2"), noConflict, ""},
		{"two snapshots of one volume", snap("s1", "v"), snap("s2", "v"), noConflict, ""},
		{"snapshot same name", snap("s1", "v"), snap("s1", "w"), conflict, locks.SpaceSnapshotName},
		{"snapshot blocks delete of source", snap("s1", "v"), del("v"), conflict, sourceSpace},
		{"snapshot blocks expand of source", snap("s1", "v"), expand("v"), conflict, sourceSpace},
		{"snapshot allows publish of source", snap("s1", "v"), publish("v"), noConflict, ""},
		{"delete blocks snapshot", del("v"), snap("s1", "v"), conflict, sourceSpace},
		{"clone blocks delete of source", clone("n", "v"), del("v"), conflict, sourceSpace},
		{"clone and snapshot share source", clone("n", "v"), snap("s", "v"), noConflict, ""},
		{"restore blocks delete snapshot", restore("n", "s"), delSnap("s"), conflict, locks.SpaceSourceSnapshot},
		{"delete snapshot twice", delSnap("s"), delSnap("s"), conflict, locks.SpaceSnapshot},
		{"group snapshot blocks delete of member", groupSnap("g", "a", "b", "a"), del("b"), conflict, sourceSpace},
		{"group snapshots share sources", groupSnap("g", "a", "b"), groupSnap("g2", "b"), noConflict, ""},
		{"group delete blocks member delete", delGroup, delSnap("s2"), conflict, locks.SpaceSnapshot},
		{"validate takes no lock", validate, del("v"), noConflict, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ic := newIC(t, idempotency.Options{})
			release := blocked(t, ic, tc.first.method, tc.first.req, nil)
			_, err := call(context.Background(), ic, tc.second.method, tc.second.req, okHandler(nil))
			if !tc.want {
				if err != nil {
					t.Fatalf("second call: got %v, want success", err)
				}
			} else {
				if status.Code(err) != codes.Aborted {
					t.Fatalf("second call: got %v, want Aborted", err)
				}
				msg := status.Convert(err).Message()
				if !strings.Contains(msg, tc.first.method) || !strings.HasPrefix(msg, tc.space+" ") || !strings.Contains(msg, "has held it for") {
					t.Errorf("message: got %q, want it to name space %q, holder %s and the hold time", msg, tc.space, tc.first.method)
				}
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
			if st := ic.Locks().Stats(); st.Held != 0 {
				t.Errorf("after both calls: got %d held keys, want 0", st.Held)
			}
		})
	}
}

func TestKeysOverride(t *testing.T) {
	if _, err := idempotency.New(idempotency.Options{Keys: map[string]locks.KeyFunc{"CreateVolume": nil}}); err == nil {
		t.Error("New with a short method name: got nil error, want one")
	}
	byNode := func(_ context.Context, req any) []locks.Lock {
		r, _ := req.(*csi.ControllerPublishVolumeRequest)
		return []locks.Lock{{Key: locks.Key{Space: "node", ID: r.GetNodeId()}}}
	}
	ic := newIC(t, idempotency.Options{Keys: map[string]locks.KeyFunc{
		mPublish: byNode,
		mDelete:  nil, // no locks
	}})
	release := blocked(t, ic, mPublish, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n1"}, nil)
	if _, err := call(context.Background(), ic, mPublish, &csi.ControllerPublishVolumeRequest{VolumeId: "w", NodeId: "n1"}, okHandler(nil)); status.Code(err) != codes.Aborted {
		t.Errorf("custom key, same node: got %v, want Aborted", err)
	}
	if _, err := call(context.Background(), ic, mPublish, &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n2"}, okHandler(nil)); err != nil {
		t.Errorf("custom key, other node: got %v, want success", err)
	}
	_ = release()
	release = blocked(t, ic, mDelete, &csi.DeleteVolumeRequest{VolumeId: "v"}, nil)
	if _, err := call(context.Background(), ic, mDelete, &csi.DeleteVolumeRequest{VolumeId: "v"}, okHandler(nil)); err != nil {
		t.Errorf("locking disabled: got %v, want success", err)
	}
	_ = release()
}
