package runner_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/runner"
)

// A driver's main builds its csikit server and hands it to NewDriver with
// its endpoint and HTTP address; Run serves until SIGINT or SIGTERM. Here
// the context ends it after one look at /readyz?verbose.
func ExampleNewDriver() {
	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	drv := &probeDriver{}
	drv.ready.Store(true)
	srv, err := csikit.NewServer(drv, csikit.Options{Name: "example.csikit.dev", Version: "v1", NodeID: "node-1"})
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // or HTTPAddress: ":9808"
	if err != nil {
		log.Fatal(err)
	}
	d, err := runner.NewDriver(runner.DriverOptions{
		Server: srv, Endpoint: "unix://" + filepath.Join(dir, "csi.sock"), HTTPListener: ln,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	for d.Ready(ctx) != nil {
		time.Sleep(time.Millisecond)
	}
	resp, err := http.Get("http://" + ln.Addr().String() + "/readyz?verbose")
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(string(body))
	cancel()
	fmt.Println("run:", <-done)
	// Output:
	// [+]running ok
	// [+]http ok
	// [+]csi ok
	// [+]probe ok
	// [+]journal ok
	// readyz check passed
	// run: <nil>
}
