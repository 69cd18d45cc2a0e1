package csikit_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/journal"
)

// volumes is a toy controller: Provisioner, plus VolumeLookup so csikit
// can answer ValidateVolumeCapabilities (required of every controller).
type volumes struct{}

func (volumes) LookupVolume(_ context.Context, id string) error {
	return status.Errorf(codes.NotFound, "volume %q does not exist", id) // a toy: it keeps nothing
}

func (volumes) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	id, _ := journal.ReservedID(ctx) // the journal's ID: retries get the same one
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: r.GetCapacityRange().GetRequiredBytes()}}, nil
}

func (volumes) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}

// NewServer derives what the server advertises from what the driver
// implements: a Provisioner is a controller with CREATE_DELETE_VOLUME,
// and Options.Clone adds CLONE_VOLUME.
func ExampleNewServer() {
	srv, err := csikit.NewServer(volumes{}, csikit.Options{
		Name:    "toy.vendor.example",
		Version: "v1.0.0",
		Clone:   true,
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Journal: journal.NewMemory(), // use journal.OpenFile to survive restarts
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	caps := srv.Capabilities()
	for _, c := range caps.Plugin {
		fmt.Println("plugin:", c.GetService().GetType())
	}
	for _, c := range caps.Controller {
		fmt.Println("controller:", c.GetRpc().GetType())
	}
	fmt.Println("serves NodePublishVolume:", srv.Serves(csi.Node_NodePublishVolume_FullMethodName))
	// A real main would now block in srv.ListenAndServe(ctx, "unix:///csi/csi.sock").

	// Output:
	// plugin: CONTROLLER_SERVICE
	// controller: CREATE_DELETE_VOLUME
	// controller: CLONE_VOLUME
	// serves NodePublishVolume: false
}

// A controller that can answer neither ValidateVolumeCapabilities nor a
// volume lookup is not conformant: NewServer refuses it and says what to
// implement.
func ExampleNewServer_nonConformantController() {
	type provisionerOnly struct{ csikit.Provisioner }
	_, err := csikit.NewServer(provisionerOnly{volumes{}}, csikit.Options{Name: "toy.vendor.example", Version: "v1.0.0"})
	fmt.Println(err != nil && strings.Contains(err.Error(), "implement csikit.VolumeLookup"))
	// Output: true
}

// A driver name must follow the spec's rules; NewServer says what is wrong.
func ExampleNewServer_invalidName() {
	_, err := csikit.NewServer(volumes{}, csikit.Options{Name: "My_Driver", Version: "1"})
	fmt.Println(err != nil)
	// Output: true
}

// The level of each call's line comes from the RPC table: mutating RPCs at
// Info, polling and read RPCs at Debug; failures by code. Pass your own
// function as Options.LogLevel to change it.
func ExampleDefaultLogLevel() {
	fmt.Println(csikit.DefaultLogLevel(csi.Node_NodeGetVolumeStats_FullMethodName, codes.OK))
	fmt.Println(csikit.DefaultLogLevel(csi.Controller_CreateVolume_FullMethodName, codes.OK))
	fmt.Println(csikit.DefaultLogLevel(csi.Controller_CreateVolume_FullMethodName, codes.Internal))
	// Output:
	// DEBUG
	// INFO
	// ERROR
}

// The lock keys of the RPC table: what each call holds while it runs.
func ExampleLockKeys() {
	keys := csikit.LockKeys()
	req := &csi.NodePublishVolumeRequest{VolumeId: "vol-1", TargetPath: "/pods/p/vol"}
	for _, l := range keys[csi.Node_NodePublishVolume_FullMethodName](context.Background(), req) {
		fmt.Println(l.Mode, l.Key.Space, l.Key.ID)
	}
	_, readLocks := keys[csi.Controller_ListVolumes_FullMethodName]
	fmt.Println("ListVolumes locks:", readLocks)
	// Output:
	// exclusive volume vol-1
	// exclusive target path /pods/p/vol
	// ListVolumes locks: false
}
