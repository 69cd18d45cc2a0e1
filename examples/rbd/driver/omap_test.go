package driver_test

import (
	"fmt"
	"testing"

	"github.com/ceph/go-ceph/rados"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
)

// An omap with more keys than one read returns (an access object of a
// volume staged on many nodes, each with attach/, stage/ and fence/ keys)
// is read whole: readOmap and readFences page until the end.
func TestReadOmapManyKeys(t *testing.T) {
	c := cephtest.Require(t)
	conn := cephtest.Admin(t, c)
	io, err := conn.OpenIOContext(c.Pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(io.Destroy)
	io.SetNamespace("t-omap-" + journal.RandomID("")[:12])

	for _, n := range []int{40, 1300} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			oid := fmt.Sprintf("many-%d", n)
			want := map[string][]byte{}
			for i := range n {
				want[fmt.Sprintf("attach/node-%05d", i)] = []byte(`{}`)
				want[fmt.Sprintf("fence/node-%05d", i)] = []byte(`{"addrs":["10.0.0.1:0/1"]}`)
				want[fmt.Sprintf("stage/node-%05d", i)] = []byte(`{"addrs":[]}`)
			}
			op := rados.CreateWriteOp()
			defer op.Release()
			op.SetOmap(want)
			if err := op.Operate(io, oid, rados.OperationNoFlag); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = io.Delete(oid) })

			got, ok, err := driver.ReadOmap(io, oid)
			if err != nil || !ok {
				t.Fatalf("ReadOmap = ok %v, %v", ok, err)
			}
			if len(got) != len(want) {
				t.Fatalf("ReadOmap read %d keys of %d", len(got), len(want))
			}
			for k, v := range want {
				if string(got[k]) != string(v) {
					t.Fatalf("ReadOmap[%q] = %q, want %q", k, got[k], v)
				}
			}
			nodes, err := driver.ReadFenceNodes(io, oid)
			if err != nil || len(nodes) != n {
				t.Fatalf("readFences found %d fenced nodes of %d (%v)", len(nodes), n, err)
			}
		})
	}
	if _, ok, err := driver.ReadOmap(io, "missing"); ok || err != nil {
		t.Fatalf("ReadOmap of a missing object = ok %v, %v", ok, err)
	}
}

// A large omap rewritten while it is read page by page is never returned
// as a mix of two versions: every read holds one generation throughout
// (or fails Aborted after starting over too often).
func TestReadOmapConsistentAcrossPages(t *testing.T) {
	c := cephtest.Require(t)
	conn := cephtest.Admin(t, c)
	io, err := conn.OpenIOContext(c.Pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(io.Destroy)
	wio, err := conn.OpenIOContext(c.Pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wio.Destroy)
	ns := "t-omap-" + journal.RandomID("")[:12]
	io.SetNamespace(ns)
	wio.SetNamespace(ns)
	const oid, n = "rewritten", 2000
	write := func(gen int) error {
		vals := make(map[string][]byte, n)
		for i := range n {
			vals[fmt.Sprintf("k%05d", i)] = []byte(fmt.Sprint(gen))
		}
		op := rados.CreateWriteOp()
		defer op.Release()
		op.SetOmap(vals)
		return op.Operate(wio, oid, rados.OperationNoFlag)
	}
	if err := write(0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wio.Delete(oid) })
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		for gen := 1; ; gen++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := write(gen); err != nil {
				done <- err
				return
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("writer: %v", err)
		}
	}()
	for range 40 {
		m, ok, err := driver.ReadOmap(io, oid)
		if status.Code(err) == codes.Aborted {
			continue
		}
		if err != nil || !ok || len(m) != n {
			t.Fatalf("ReadOmap = %d keys, ok %v, %v; want %d", len(m), ok, err, n)
		}
		gens := map[string]bool{}
		for _, v := range m {
			gens[string(v)] = true
		}
		if len(gens) != 1 {
			t.Fatalf("ReadOmap returned a mix of %d generations", len(gens))
		}
	}
}
