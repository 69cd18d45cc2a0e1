package locks_test

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/locks"
	"google.golang.org/grpc/status"
)

func ExampleTable() {
	tab := locks.NewTable()
	start := time.Now()
	vol := locks.Key{Space: locks.SpaceVolume, ID: "vol-1"}
	_, ok := tab.TryLock(vol, locks.Exclusive, locks.Owner{Method: csi.Controller_DeleteVolume_FullMethodName, Since: start})
	fmt.Println("delete acquired:", ok)
	h, ok := tab.TryLock(vol, locks.Exclusive, locks.Owner{Method: csi.Controller_ControllerPublishVolume_FullMethodName, Since: start.Add(1500 * time.Millisecond)})
	fmt.Println("publish acquired:", ok, "- held by", h.Method, "for", h.Held)
	tab.Unlock(vol, locks.Exclusive)
	fmt.Println("held:", tab.Stats().Held)
	// Output:
	// delete acquired: true
	// publish acquired: false - held by /csi.v1.Controller/DeleteVolume for 1.5s
	// held: 0
}

// A Set takes a call's locks all or none and releases them at its end.
func ExampleSet() {
	tab := locks.NewTable()
	req := &csi.DeleteVolumeRequest{VolumeId: "vol-1"}

	first := locks.Set{Table: tab, Owner: locks.Owner{Method: csi.Controller_DeleteVolume_FullMethodName}}
	defer first.Release()
	fmt.Println("first:", first.Acquire(locks.DeleteVolumeKeys(context.Background(), req)...), first.Len())

	retry := locks.Set{Table: tab, Owner: locks.Owner{Method: csi.Controller_DeleteVolume_FullMethodName}}
	defer retry.Release()
	err := retry.Acquire(locks.DeleteVolumeKeys(context.Background(), req)...)
	fmt.Println("retry:", status.Code(err), retry.Len())
	// Output:
	// first: <nil> 2
	// retry: Aborted 0
}
