//go:build linux

package sanity_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
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

// A block driver's split-brain test: node A is the driver's node plugin
// at the Run's endpoint, node B a second node plugin with another node
// ID on the same host. Freeze stops A's data-path daemon besides the
// writer the harness stops itself; Check runs fsck on the volume's image
// once both nodes unstaged it.
func ExampleSplitBrainConfig() {
	_ = func(t *testing.T) {
		sanity.Run(t, sanity.Endpoint("unix:///run/csi/node-a.sock"), sanity.Config{
			Areas: sanity.SplitBrain,
			SplitBrain: &sanity.SplitBrainConfig{
				NodeB:  "unix:///run/csi/node-b.sock",
				Freeze: sanity.StopProcesses("rbd-fuse"),
				Check: func(ctx context.Context, volumeID string) error {
					return sanity.CheckFilesystem(ctx, "/var/lib/images/"+volumeID+".img")
				},
			},
		})
	}
}

// StopProcesses freezes processes by PID or name and resumes them.
func ExampleStopProcesses() {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	resume, err := sanity.StopProcesses(strconv.Itoa(cmd.Process.Pid))(context.Background())
	fmt.Println("stopped:", err == nil)
	fmt.Println("resumed:", resume() == nil)
	// Output:
	// stopped: true
	// resumed: true
}
