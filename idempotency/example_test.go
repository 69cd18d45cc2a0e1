package idempotency_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/idempotency"
	"github.com/csikit/csikit/journal"
)

// A driver server with per-volume locks and a crash-safe journal.
func Example() {
	dir, err := os.MkdirTemp("", "csikit-example") // a driver uses a state directory on the node
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	j, err := journal.OpenFile(filepath.Join(dir, "journal.db"), journal.FileOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	ic, err := idempotency.New(idempotency.Options{
		Journal: j,
		Keys:    csikit.LockKeys(), // the locks of csikit's RPC table
		NewID:   func(name string) string { return "csi-vol-" + journal.RandomID(name) },
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		// recovery, logging, metrics and validation go first
		ic.UnaryServerInterceptor(),
	))
	// csi.RegisterControllerServer(srv, driver) ...
	srv.Stop()
	fmt.Println(ic.Locks().Stats().Held)
	// Output: 0
}

// A driver that accepts retries whose topology changed (the spec's
// "compatible" rule) leaves accessibility requirements out of the
// fingerprint.
func ExampleOptions_fingerprint() {
	ignoreTopology := func(req any) ([]byte, bool) {
		if r, ok := req.(*csi.CreateVolumeRequest); ok {
			c := proto.Clone(r).(*csi.CreateVolumeRequest)
			c.AccessibilityRequirements = nil
			req = c
		}
		return journal.Fingerprint(req)
	}
	a := &csi.CreateVolumeRequest{Name: "pvc-1", AccessibilityRequirements: &csi.TopologyRequirement{
		Requisite: []*csi.Topology{{Segments: map[string]string{"zone": "a"}}}}}
	b := &csi.CreateVolumeRequest{Name: "pvc-1", AccessibilityRequirements: &csi.TopologyRequirement{
		Requisite: []*csi.Topology{{Segments: map[string]string{"zone": "a"}}, {Segments: map[string]string{"zone": "b"}}}}}
	fa, _ := ignoreTopology(a)
	fb, _ := ignoreTopology(b)
	fmt.Println("same fingerprint:", string(fa) == string(fb))
	_, err := idempotency.New(idempotency.Options{Journal: journal.NewMemory(), Fingerprint: ignoreTopology})
	fmt.Println(err)
	// Output:
	// same fingerprint: true
	// <nil>
}
