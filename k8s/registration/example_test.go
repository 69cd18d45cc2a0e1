package registration_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/csikit/csikit/k8s/registration"
)

func Example() {
	// In a real node plugin Dir is left empty (kubelet's default
	// /var/lib/kubelet/plugins_registry, mounted from the host) and Endpoint
	// is the host path of the CSI socket.
	dir, _ := os.MkdirTemp("", "reg")
	defer os.RemoveAll(dir)

	r, err := registration.New(registration.Options{
		DriverName: "block.vendor.example",
		Endpoint:   "/var/lib/kubelet/plugins/block.vendor.example/csi.sock",
		Dir:        dir,
		Logger:     slog.Default(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := r.Listen(); err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }() // next to the CSI server

	fmt.Println(filepath.Base(r.SocketPath()))
	// The driver's Probe fails while kubelet reports a registration error.
	fmt.Println("probe error:", r.Err())

	cancel() // shutdown: the socket is removed
	fmt.Println(<-done)
	_, err = os.Stat(r.SocketPath())
	fmt.Println(os.IsNotExist(err))
	// Output:
	// block.vendor.example-reg.sock
	// probe error: <nil>
	// <nil>
	// true
}
