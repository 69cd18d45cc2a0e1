//go:build linux

package main_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/sanity"
)

// requireNode skips without root and the node tools the rbd-fuse mapper
// and the file systems need.
func requireNode(t *testing.T) {
	t.Helper()
	cephtest.RequireRoot(t)
	for _, tool := range []string{"rbd-fuse", "mkfs.ext4", "resize2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			cephtest.Skipf(t, "needs %s", tool)
		}
	}
}

// sanityKind is a volume kind a StorageClass can select, as the
// harnesses run it.
type sanityKind struct {
	name   string
	access sanity.AccessType
	fsType string            // the capability's fs_type
	params map[string]string // on top of the pool
	size   int64
	tool   string
}

// sanityKinds: ext4 mount volumes (the default), xfs mount volumes
// (fsType: xfs, the capability naming no fs_type; mkfs.xfs makes nothing
// smaller than 300 MiB) and block volumes.
var sanityKinds = []sanityKind{
	{name: "ext4", access: sanity.MountAccess, fsType: "ext4", size: 16 << 20, tool: "mkfs.ext4"},
	{name: "xfs", access: sanity.MountAccess, params: map[string]string{driver.ParamFsType: "xfs"}, size: 320 << 20, tool: "mkfs.xfs"},
	{name: "block", access: sanity.BlockAccess, size: 16 << 20},
}

// config is the harness configuration of kind k against cluster c.
func (k sanityKind) config(t *testing.T, c cephtest.Cluster, log func() ([]byte, error)) sanity.Config {
	t.Helper()
	if k.tool != "" {
		if _, err := exec.LookPath(k.tool); err != nil {
			cephtest.Skipf(t, "needs %s", k.tool)
		}
	}
	skip := map[string]string{}
	if k.name == "ext4" && !mount.CanResizeOnline("ext4") {
		// ext4 online resize (EXT4_IOC_RESIZE_FS) needs CAP_SYS_RESOURCE;
		// without it resize2fs fails with "Permission denied".
		why := "ext4 online resize needs CAP_SYS_RESOURCE, which this test process lacks"
		skip["mount/Expansion/NodeExpandVolume/after_publish"] = why
		skip["mount/DataPath/expansion_visible_on_node"] = why
	}
	params := map[string]string{driver.ParamPool: c.Pool}
	for key, v := range k.params {
		params[key] = v
	}
	return sanity.Config{
		Skip:       skip,
		AccessType: k.access,
		VolumeSize: k.size,
		ExpandSize: 2 * k.size,
		FsType:     k.fsType,
		Parameters: params,
		Secrets:    c.Secrets(),
		Log:        log,
	}
}

// TestSanity runs csikit's conformance harness against the driver (in
// this process) on the real cluster, once per sanityKinds entry, with the
// rbd-fuse mapper (this CI kernel has no rbd or nbd module).
func TestSanity(t *testing.T) {
	c := cephtest.Require(t)
	requireNode(t)
	for _, kind := range sanityKinds {
		t.Run(kind.name, func(t *testing.T) {
			state := t.TempDir()
			log := &sanity.LogBuffer{}
			logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
			cfg := kind.config(t, c, log.Bytes)
			target := sanity.Restartable(func() (any, csikit.Options, error) {
				d, err := driver.New(driver.Options{
					Monitors: c.Monitors, DefaultPool: c.Pool, NodeID: "sanity-node", StateDir: state,
					Mapper: driver.MapperFUSE, MaxCloneDepth: 1, Logger: logger,
				})
				if err != nil {
					return nil, csikit.Options{}, err
				}
				return d.Service(), d.ServerOptions(csikit.Options{
					Name: "rbd.csikit.dev", Version: "v0.0.0-sanity", NodeID: "sanity-node", Logger: logger,
				}), nil
			})
			start := time.Now()
			sanity.Run(t, target, cfg)
			t.Logf("sanity against rbd (%s) took %v", kind.name, time.Since(start))
		})
	}
}

// TestSanityEndpoint runs csikit's harness by endpoint against the built
// driver binary, as a CO reaches it, once per sanityKinds entry; the
// Restart area restarts the process (SIGTERM, then the same flags and
// state directory).
func TestSanityEndpoint(t *testing.T) {
	c := cephtest.Require(t)
	requireNode(t)
	bin := driverBinary(t)
	for _, kind := range sanityKinds {
		t.Run(kind.name, func(t *testing.T) {
			dir := t.TempDir()
			sock, logFile := filepath.Join(dir, "csi.sock"), filepath.Join(dir, "driver.log")
			var cmd *exec.Cmd
			start := func() error {
				_ = os.Remove(sock)
				lf, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
				if err != nil {
					return err
				}
				defer lf.Close()
				cmd = exec.Command(bin, "--endpoint", "unix://"+sock, "--nodeid", "sanity-node",
					"--monitors", c.Monitors, "--pool", c.Pool, "--state-dir", filepath.Join(dir, "state"),
					"--mapper", "rbd-fuse", "--max-clone-depth", "1", "--log-level", "debug")
				cmd.Stderr = lf
				if err := cmd.Start(); err != nil {
					return err
				}
				for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
						return nil
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("the driver's socket never appeared (log in %s)", logFile)
					}
				}
			}
			stop := func() {
				if cmd != nil && cmd.ProcessState == nil {
					_ = cmd.Process.Signal(syscall.SIGTERM)
					_ = cmd.Wait()
				}
			}
			if err := start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(stop)
			cfg := kind.config(t, c, func() ([]byte, error) { return os.ReadFile(logFile) })
			cfg.Restart = func(context.Context) error { stop(); return start() }
			began := time.Now()
			sanity.Run(t, sanity.Endpoint("unix://"+sock), cfg)
			t.Logf("sanity by endpoint against the rbd binary (%s) took %v", kind.name, time.Since(began))
		})
	}
}
