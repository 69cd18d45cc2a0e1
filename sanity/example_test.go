//go:build linux

package sanity_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/sanity"
)

// A vendor's whole conformance test is one function in the driver's
// package: the driver value is served in-process through csikit, on a
// real unix socket, and every case is a subtest (go test -run
// 'TestSanity/mount/Node' runs one area).
func Example() {
	_ = func(t *testing.T) { // func TestSanity(t *testing.T)
		driver := newRefDriver(t.TempDir(), nil, "") // mydriver.New(cfg)
		sanity.Run(t, sanity.Driver(driver, csikit.Options{
			Name: "ref.sanity.csikit.dev", Version: "v1.0.0", NodeID: "node-1",
		}), sanity.Config{})
	}
}

// Drivers keeping their state on disk can be restarted by the harness:
// start is called again after the server stops, and the Restart area
// checks that retries find the volumes created before.
func ExampleRestartable() {
	_ = func(t *testing.T) {
		state := t.TempDir()
		sanity.Run(t, sanity.Restartable(func() (any, csikit.Options, error) {
			return newRefDriver(state, nil, ""), csikit.Options{Name: "ref.sanity.csikit.dev", Version: "v1.0.0", NodeID: "node-1"}, nil
		}), sanity.Config{AccessType: sanity.BothAccess, VolumeSize: 64 << 20})
	}
}

// A driver in any language is tested at its endpoint; the Restart hook
// restarts its process, and Log hands the harness the driver's log to
// search for secrets.
func ExampleEndpoint() {
	_ = func(t *testing.T) {
		sanity.Run(t, sanity.Endpoint("unix:///run/csi/csi.sock"), sanity.Config{
			Secrets: map[string]string{"password": "s3cret"},
			Restart: func(ctx context.Context) error {
				return exec.CommandContext(ctx, "systemctl", "restart", "my-csi-driver").Run()
			},
			Log: func() ([]byte, error) {
				return exec.Command("journalctl", "--unit=my-csi-driver", "--output=cat").Output()
			},
		})
	}
}
