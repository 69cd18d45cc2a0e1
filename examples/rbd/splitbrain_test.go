//go:build linux

package main_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/sanity"
)

// fuseDaemons returns the PIDs of the rbd-fuse processes whose command
// line names dir (a node's state directory): that node's mappings only,
// never another test's.
func fuseDaemons(dir string) []string {
	var pids []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		comm, err := os.ReadFile(filepath.Join(p, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "rbd-fuse" {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		if strings.Contains(string(cmd), dir+"/") {
			pids = append(pids, filepath.Base(p))
		}
	}
	return pids
}

// TestSplitBrainRBDFuse runs csikit sanity's SplitBrain area against the
// driver with the rbd-fuse mapper: node A (the in-process target, which
// serves the controller too) and node B (a second node plugin on a socket
// of its own, node ID node-b), each with its own state directory and so
// its own rbd-fuse per mapping, i.e. its own Ceph client. The freeze stops
// A's rbd-fuse (and the harness A's writer); ControllerUnpublishVolume(A)
// fences A's client; B stages, writes, and A's late writes must not land.
// The filesystem is checked (e2fsck -n) on an export of the image.
// RBD_SPLITBRAIN_TRIALS sets the number of trials (default 3; the issue's
// bar is 20).
func TestSplitBrainRBDFuse(t *testing.T) {
	c := cephtest.Require(t)
	requireNode(t)
	trials := 3
	if v := os.Getenv("RBD_SPLITBRAIN_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("RBD_SPLITBRAIN_TRIALS=%q: want a positive number", v)
		}
		trials = n
	}
	stateA, stateB := t.TempDir(), t.TempDir()
	dA, err := driver.New(driver.Options{Monitors: c.Monitors, DefaultPool: c.Pool, NodeID: "node-a", StateDir: stateA, Mapper: driver.MapperFUSE})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dA.Close() })
	dB, err := driver.New(driver.Options{Monitors: c.Monitors, DefaultPool: c.Pool, NodeID: "node-b", StateDir: stateB, Mapper: driver.MapperFUSE})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dB.Close() })
	srvB, err := csikit.NewServer(dB.Service(), dB.ServerOptions(csikit.Options{Name: "rbd.csikit.dev", Version: "v0.0.0-sanity", NodeID: "node-b"}))
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "rbd-sb")
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("unix", filepath.Join(sockDir, "b.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srvB.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = os.RemoveAll(sockDir)
	})
	exportDir := t.TempDir()
	cfg := sanity.Config{
		Areas:      sanity.SplitBrain,
		VolumeSize: 16 << 20,
		Parameters: map[string]string{driver.ParamPool: c.Pool},
		Secrets:    c.Secrets(),
		SplitBrain: &sanity.SplitBrainConfig{
			NodeB:  "unix://" + filepath.Join(sockDir, "b.sock"),
			Trials: trials,
			Freeze: func(ctx context.Context) (func() error, error) {
				pids := fuseDaemons(stateA)
				if len(pids) == 0 {
					return nil, fmt.Errorf("no rbd-fuse of node A (state directory %s) to freeze", stateA)
				}
				return sanity.StopProcesses(pids...)(ctx)
			},
			Check: func(ctx context.Context, id string) error {
				img := "csi-vol-" + id[strings.IndexByte(id, '-')+1:]
				file := filepath.Join(exportDir, img)
				defer os.Remove(file)
				out, err := exec.CommandContext(ctx, "rbd", "-c", c.Conf, "-n", "client.admin", "-k", c.AdminKeyring,
					"export", c.Pool+"/"+img, file).CombinedOutput()
				if err != nil {
					return fmt.Errorf("rbd export %s: %v: %s", img, err, out)
				}
				return sanity.CheckFilesystem(ctx, file)
			},
		},
	}
	start := time.Now()
	sanity.Run(t, sanity.Driver(dA.Service(), dA.ServerOptions(csikit.Options{Name: "rbd.csikit.dev", Version: "v0.0.0-sanity", NodeID: "node-a"})), cfg)
	t.Logf("%d split-brain trials with rbd-fuse took %v", trials, time.Since(start))
}
