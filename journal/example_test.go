package journal_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/idempotency"
	"github.com/csikit/csikit/journal"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// A driver's CreateVolume creates its backend object under the reserved ID,
// so a retry after a timeout or a crash finds the same object.
func ExampleReservedID() {
	createVolume := func(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
		id, ok := journal.ReservedID(ctx)
		if !ok {
			id = req.GetName() // no journal configured
		}
		// backend.CreateIfMissing(id, req.GetCapacityRange().GetRequiredBytes())
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id}}, nil
	}
	ctx := journal.ContextWithReservedID(context.Background(), "csi-vol-1")
	resp, _ := createVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1"})
	fmt.Println(resp.GetVolume().GetVolumeId())
	// Output: csi-vol-1
}

func ExampleMemory() {
	ctx := context.Background()
	j := journal.NewMemory()
	req := &csi.CreateVolumeRequest{Name: "pvc-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30}}
	fp, _ := journal.Fingerprint(req)
	rec, _ := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: "pvc-1", Fingerprint: fp, ID: "vol-a"})
	fmt.Println("first:", rec.ID)
	rec, _ = j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: "pvc-1", Fingerprint: fp, ID: "vol-b"})
	fmt.Println("retry:", rec.ID)
	req.CapacityRange.RequiredBytes *= 2
	fp2, _ := journal.Fingerprint(req)
	_, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: "pvc-1", Fingerprint: fp2, ID: "vol-c"})
	fmt.Println("other size:", status.Code(err))
	// Output:
	// first: vol-a
	// retry: vol-a
	// other size: AlreadyExists
}

// A single-node driver keeps its volume metadata in a KV space of the
// journal file. DeferPut in CreateVolume lands in the same transaction as
// the journal's commit of the call: one flush, and after a crash either
// both the metadata and the commit exist or neither does.
func ExampleKV_DeferPut() {
	dir, err := os.MkdirTemp("", "csikit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	j, err := journal.OpenFile(filepath.Join(dir, "journal.db"), journal.FileOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	volumes, err := j.KV("volumes")
	if err != nil {
		log.Fatal(err)
	}
	ic, err := idempotency.New(idempotency.Options{Journal: j})
	if err != nil {
		log.Fatal(err)
	}
	createVolume := func(ctx context.Context, req any) (any, error) {
		id, _ := journal.ReservedID(ctx)
		// backend.CreateIfMissing(id) ...
		if err := volumes.DeferPut(ctx, id, []byte(`{"size":1073741824}`)); err != nil {
			return nil, err
		}
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: 1 << 30}}, nil
	}
	// The gRPC server runs the interceptor; called directly here.
	_, err = ic.UnaryServerInterceptor()(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-1"},
		&grpc.UnaryServerInfo{FullMethod: csi.Controller_CreateVolume_FullMethodName}, createVolume)
	if err != nil {
		log.Fatal(err)
	}
	meta := map[string]string{}
	volumes.ForEach(func(id string, v []byte) error { meta[id] = string(v); return nil })
	for id, m := range meta {
		rec, _, _ := j.LookupID(context.Background(), journal.KindVolume, id)
		fmt.Println(rec.Name, rec.Committed, m)
	}
	// Output: pvc-1 true {"size":1073741824}
}

// A driver reads its metadata with KV.Get instead of keeping a copy in
// memory. Inside a create or delete call, Get with the call's context
// already sees what the call deferred.
func ExampleKV_Get() {
	dir, err := os.MkdirTemp("", "csikit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	j, err := journal.OpenFile(filepath.Join(dir, "journal.db"), journal.FileOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	volumes, err := j.KV("volumes")
	if err != nil {
		log.Fatal(err)
	}
	ic, err := idempotency.New(idempotency.Options{Journal: j})
	if err != nil {
		log.Fatal(err)
	}
	createVolume := func(ctx context.Context, req any) (any, error) {
		id, _ := journal.ReservedID(ctx)
		if err := volumes.DeferPut(ctx, id, []byte("1GiB")); err != nil {
			return nil, err
		}
		v, ok, err := volumes.Get(ctx, id) // this call's own deferred write
		if err != nil {
			return nil, err
		}
		_, durable, _ := volumes.Get(context.Background(), id) // any other reader
		fmt.Printf("in the call: %s %v; elsewhere: %v\n", v, ok, durable)
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: 1 << 30}}, nil
	}
	resp, err := ic.UnaryServerInterceptor()(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-1"},
		&grpc.UnaryServerInfo{FullMethod: csi.Controller_CreateVolume_FullMethodName}, createVolume)
	if err != nil {
		log.Fatal(err)
	}
	id := resp.(*csi.CreateVolumeResponse).GetVolume().GetVolumeId()
	v, ok, _ := volumes.Get(context.Background(), id)
	fmt.Printf("after the call: %s %v\n", v, ok)
	// Output:
	// in the call: 1GiB true; elsewhere: false
	// after the call: 1GiB true
}

// Reservations of creates the CO gave up on are released once the
// driver's Clean removed what they left behind.
func ExampleSweep() {
	ctx := context.Background()
	j := journal.NewMemory()
	// A CreateVolume that failed with Internal keeps its reservation for
	// the retry; here nobody retries.
	j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: "pvc-gone", ID: "vol-1", Fingerprint: []byte("fp")})
	time.Sleep(2 * time.Millisecond)

	n, err := journal.Sweep(ctx, journal.SweepOptions{
		Journal:   j,
		Kind:      journal.KindVolume,
		OlderThan: time.Millisecond, // a driver uses hours
		Clean: func(ctx context.Context, rec journal.Record) error {
			fmt.Println("removing", rec.ID) // backend.DeleteIfExists(rec.ID)
			return nil
		},
	})
	fmt.Println(n, err)
	// Output:
	// removing vol-1
	// 1 <nil>
}

// A journal kept in the storage pool each CreateVolume names, as a
// networked backend keeps it: Request gives the journal the call's
// parameters, and its secrets to open the pool with.
func ExampleRequest() {
	pools := map[string]journal.Journal{
		"fast": journal.NewMemory(),
		"slow": journal.NewMemory(),
	}
	journalFor := func(ctx context.Context) (journal.Journal, bool) {
		req, _ := journal.Request(ctx)
		r, ok := req.(*csi.CreateVolumeRequest)
		if !ok {
			return nil, false
		}
		j, ok := pools[r.GetParameters()["pool"]]
		return j, ok
	}
	// The interceptor does this for every Journal call it makes.
	ctx := journal.ContextWithRequest(context.Background(),
		&csi.CreateVolumeRequest{Name: "pvc-1", Parameters: map[string]string{"pool": "fast"}})
	j, ok := journalFor(ctx)
	fmt.Println(ok, j == pools["fast"])
	// Output: true true
}

// A server that journals calls without csikit's interceptor starts a Call
// per create or delete, so the driver's deferred KV writes join the
// journal's own commit, and flushes what is left before answering.
func ExampleWithCall() {
	dir, err := os.MkdirTemp("", "csikit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	j, err := journal.OpenFile(filepath.Join(dir, "journal.db"), journal.FileOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	sizes, _ := j.KV("sizes")

	req := &csi.CreateVolumeRequest{Name: "pvc-1"}
	ctx, call := journal.WithCall(context.Background(), req)
	_ = sizes.DeferPut(ctx, "vol-1", []byte("1Gi")) // the driver, inside the call
	_, durable, _ := sizes.Get(context.Background(), "vol-1")
	fmt.Println("durable before Flush:", durable)
	if err := call.Flush(); err != nil { // nothing committed it: write it now
		log.Fatal(err)
	}
	v, durable, _ := sizes.Get(context.Background(), "vol-1")
	fmt.Println("durable after Flush:", durable, string(v))
	// Output:
	// durable before Flush: false
	// durable after Flush: true 1Gi
}

// The lock keys of a kind's names and IDs: what a create and a delete of
// one object both hold.
func ExampleKind_NameKey() {
	fmt.Printf("%q\n", journal.KindSnapshot.NameKey("snap-pvc-1"))
	fmt.Printf("%q\n", journal.KindSnapshot.IDKey("snap-1"))
	// Output:
	// {"snapshot name" "snap-pvc-1"}
	// {"snapshot" "snap-1"}
}

// A running total kept by Watch makes a capacity check O(1) however many
// records the space holds; ForEachAfter pages through it from a token.
func ExampleKV_Watch() {
	dir, err := os.MkdirTemp("", "csikit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	j, err := journal.OpenFile(filepath.Join(dir, "journal.db"), journal.FileOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	sizes, err := j.KV("sizes")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if err := sizes.Put(ctx, id, []byte("1")); err != nil {
			log.Fatal(err)
		}
	}
	var total int // guarded by the journal: fn runs with it locked
	sizes.Watch(func(_ string, old, new []byte) {
		total += len(new) - len(old) // one byte per unit, for the example
	})
	if err := sizes.Put(ctx, "d", []byte("11")); err != nil {
		log.Fatal(err)
	}
	if err := sizes.Delete(ctx, "a"); err != nil {
		log.Fatal(err)
	}
	fmt.Println("total:", total)
	err = sizes.ForEachAfter("b", func(key string, _ []byte) error {
		fmt.Println("after b:", key)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// total: 4
	// after b: c
	// after b: d
}

// A driver's start visits every record of a large space with Scan, which
// reads the file sequentially; the order is the file's, so what needs an
// order sorts.
func ExampleKV_Scan() {
	dir, err := os.MkdirTemp("", "csikit-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	j, err := journal.OpenFile(filepath.Join(dir, "journal.db"), journal.FileOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	volumes, err := j.KV("volumes")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"vol-b", "vol-a", "vol-c"} {
		if err := volumes.Put(ctx, id, []byte(`{"size":1073741824}`)); err != nil {
			log.Fatal(err)
		}
	}
	var ids []string
	var total int
	err = volumes.Scan(func(id string, v []byte) error {
		ids = append(ids, id) // the value is valid only during the call
		total += len(v)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	slices.Sort(ids)
	fmt.Println(ids, total)
	// Output: [vol-a vol-b vol-c] 57
}

// A create call whose reservation is fresh skips looking for what an
// earlier attempt left under the ID: with random IDs there was none.
func ExampleReservedFresh() {
	ctx := journal.ContextWithReservation(context.Background(), journal.Record{ID: "csi-vol-1", Fresh: true})
	id, _ := journal.ReservedID(ctx)
	fmt.Println(id, journal.ReservedFresh(ctx))
	retry := journal.ContextWithReservation(context.Background(), journal.Record{ID: "csi-vol-1"})
	fmt.Println(journal.ReservedFresh(retry))
	// Output:
	// csi-vol-1 true
	// false
}
