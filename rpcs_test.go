package csikit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csikit/csikit/csi/validation"
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

// TestTableInterfaces derives the driver interfaces from the spec and the
// source, with no list of its own: every interface the package declares
// with a method named after a spec RPC (driver.go's Provisioner,
// snapshotmetadata.go's SnapshotMetadataReader, …) is the interface of
// that RPC's table entry, and every entry's interface has the RPC's method
// with the spec's request and response types. An interface added without
// its entry, or an entry pointing at the wrong interface, fails here.
func TestTableInterfaces(t *testing.T) {
	spec := map[string]protoreflect.MethodDescriptor{} // RPC name → descriptor
	byName := map[string]*rpc{}                        // RPC name → entry
	for i := range rpcs {
		byName[rpcs[i].method[strings.LastIndexByte(rpcs[i].method, '/')+1:]] = &rpcs[i]
	}
	svcs := csi.File_csi_proto.Services()
	for i := 0; i < svcs.Len(); i++ {
		for j := 0; j < svcs.Get(i).Methods().Len(); j++ {
			md := svcs.Get(i).Methods().Get(j)
			spec[string(md.Name())] = md
		}
	}

	// Every entry's interface has the RPC's method, with the spec's types.
	for name, e := range byName {
		if e.iface == nil {
			continue // builtin: csikit answers
		}
		m, ok := e.iface.MethodByName(name)
		if !ok {
			t.Errorf("%s: the entry's interface %v has no method %s", e.method, e.iface, name)
			continue
		}
		md := spec[name]
		if md == nil || md.IsStreamingServer() || md.IsStreamingClient() {
			continue // streaming methods take a stream of csikit's, not the spec's
		}
		ft := m.Type
		if ft.NumIn() != 2 || ft.NumOut() != 2 || ft.In(1) != reflect.TypeOf(e.newReq()) ||
			reflect.Zero(ft.Out(0)).Interface().(proto.Message).ProtoReflect().Descriptor().FullName() != md.Output().FullName() {
			t.Errorf("%s: %v.%s is %v, want the spec's (ctx, *%s) (*%s, error)", e.method, e.iface, name, ft, md.Input().Name(), md.Output().Name())
		}
	}

	// Every interface the package declares with a spec RPC's method serves
	// that RPC's entry.
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, de := range entries {
		if !strings.HasSuffix(de.Name(), ".go") || strings.HasSuffix(de.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), de.Name(), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, sp := range gd.Specs {
				ts := sp.(*ast.TypeSpec)
				it, ok := ts.Type.(*ast.InterfaceType)
				if !ok || !ts.Name.IsExported() {
					continue
				}
				for _, m := range it.Methods.List {
					for _, n := range m.Names {
						if spec[n.Name] == nil {
							continue // not an RPC (VolumeLookup.LookupVolume, …)
						}
						found++
						e := byName[n.Name]
						switch {
						case e == nil:
							t.Errorf("interface %s declares %s, which has no table entry (rpcs.go): add one", ts.Name.Name, n.Name)
						case e.iface == nil || e.iface.Name() != ts.Name.Name:
							t.Errorf("interface %s declares %s, but its table entry binds %v", ts.Name.Name, n.Name, e.iface)
						}
					}
				}
			}
		}
	}
	if found < len(spec)/2 {
		t.Errorf("found %d RPC methods in the package's interfaces, want most of the spec's %d: is the parse right?", found, len(spec))
	}
}
