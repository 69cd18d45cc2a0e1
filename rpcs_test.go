package csikit

import (
	"reflect"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit/csi/validation"
	"github.com/csikit/csikit/idempotency"
)

// TestTableCoversSpec walks the spec's own descriptors: every RPC of every
// service is in the table, with the spec's request type and streaming
// kind, or listed in unsupported with a reason; nothing else is in either.
func TestTableCoversSpec(t *testing.T) {
	byMethod := map[string]*rpc{}
	for i := range rpcs {
		e := &rpcs[i]
		if byMethod[e.method] != nil {
			t.Errorf("%s: two table entries", e.method)
		}
		byMethod[e.method] = e
	}
	spec := map[string]bool{}
	svcs := csi.File_csi_proto.Services()
	for i := 0; i < svcs.Len(); i++ {
		sd := svcs.Get(i)
		for j := 0; j < sd.Methods().Len(); j++ {
			md := sd.Methods().Get(j)
			m := fullMethod(sd, md)
			spec[m] = true
			e, inTable := byMethod[m]
			reason, skipped := unsupported[m]
			switch {
			case inTable && skipped:
				t.Errorf("%s: both in the table and unsupported (%q)", m, reason)
			case skipped && reason == "":
				t.Errorf("%s: unsupported without a reason", m)
			case skipped:
				continue
			case !inTable:
				t.Errorf("%s: not in the table (rpcs.go) nor in unsupported: add an entry and its driver interface", m)
				continue
			}
			req, ok := e.newReq().(proto.Message)
			if !ok || req.ProtoReflect().Descriptor().FullName() != md.Input().FullName() {
				t.Errorf("%s: entry's request is %T, spec says %s", m, e.newReq(), md.Input().FullName())
			}
			streaming := md.IsStreamingServer() || md.IsStreamingClient()
			if streaming != (e.bindStream != nil) || streaming == (e.bindUnary != nil) {
				t.Errorf("%s: streaming %v in the spec, entry binds unary %v, stream %v", m, streaming, e.bindUnary != nil, e.bindStream != nil)
			}
			if _, ok := validation.Lookup(m); !ok {
				t.Errorf("%s: csi/validation has no rule for it", m)
			}
		}
	}
	for m := range byMethod {
		if !spec[m] {
			t.Errorf("%s: in the table but not in the spec", m)
		}
	}
	for m := range unsupported {
		if !spec[m] {
			t.Errorf("%s: unsupported but not in the spec", m)
		}
	}
}

// TestTableLockKeys: the table's lock keys are idempotency's documented
// defaults, method for method, so a server and a standalone interceptor
// lock alike.
func TestTableLockKeys(t *testing.T) {
	def := idempotency.DefaultKeys()
	table := lockKeys()
	for m, f := range def {
		if unsupported[m] != "" {
			continue
		}
		g, ok := table[m]
		if !ok || reflect.ValueOf(f).Pointer() != reflect.ValueOf(g).Pointer() {
			t.Errorf("%s: idempotency.DefaultKeys has a key function the table does not", m)
		}
	}
	for m := range table {
		if _, ok := def[m]; !ok {
			t.Errorf("%s: the table locks, idempotency.DefaultKeys does not", m)
		}
	}
}

// TestTableInterfaces: every driver interface in driver.go serves at least
// one table entry, so none is dead.
func TestTableInterfaces(t *testing.T) {
	ifaces := []reflect.Type{
		reflect.TypeFor[Prober](), reflect.TypeFor[Provisioner](), reflect.TypeFor[CapabilityValidator](),
		reflect.TypeFor[ControllerPublisher](), reflect.TypeFor[VolumeLister](), reflect.TypeFor[CapacityReporter](),
		reflect.TypeFor[VolumeGetter](), reflect.TypeFor[Snapshotter](), reflect.TypeFor[SnapshotLister](),
		reflect.TypeFor[SnapshotGetter](), reflect.TypeFor[ControllerExpander](), reflect.TypeFor[Modifier](),
		reflect.TypeFor[ControllerHealthReporter](), reflect.TypeFor[ControllerHealthLister](),
		reflect.TypeFor[ControllerNodeInfoer](), reflect.TypeFor[GroupSnapshotter](), reflect.TypeFor[NodeStager](),
		reflect.TypeFor[NodePublisher](), reflect.TypeFor[NodeInfoer](), reflect.TypeFor[NodeStatsReporter](),
		reflect.TypeFor[NodeExpander](), reflect.TypeFor[NodeHealthReporter](), reflect.TypeFor[NodeStorageHealthReporter](),
		reflect.TypeFor[SnapshotMetadataReader](),
	}
	used := map[reflect.Type]bool{}
	for i := range rpcs {
		used[rpcs[i].iface] = true
	}
	for _, it := range ifaces {
		if !used[it] {
			t.Errorf("driver interface %v serves no table entry", it)
		}
	}
}
