//go:build linux

package main_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rbd"

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
		// Every image, snapshot, trash entry and journal record a case
		// leaves in the pool fails that case.
		BackendObjects: cephtest.BackendObjects(cephtest.Admin(t, c), c.Pool, driver.JournalNamespace),
		Skip:           skip,
		AccessType:     k.access,
		VolumeSize:     k.size,
		ExpandSize:     2 * k.size,
		FsType:         k.fsType,
		Parameters:     params,
		Secrets:        c.Secrets(),
		Log:            log,
	}
}

// secretsDir writes c's credentials as a mounted Secret holds them (one
// root-only file per key) for --secrets-dir and returns the directory.
func secretsDir(t *testing.T, c cephtest.Cluster) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "secret")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range c.Secrets() {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSanity runs csikit's conformance harness against the driver (in
// this process) on the real cluster, once per sanityKinds entry, with the
// rbd-fuse mapper (this CI kernel has no rbd or nbd module). The node
// plugin registers itself (standing credentials) and the controller
// publishes to registered nodes only, so a publish to an unknown node is
// NOT_FOUND.
func TestSanity(t *testing.T) {
	c := cephtest.Require(t)
	requireNode(t)
	for _, kind := range sanityKinds {
		t.Run(kind.name, func(t *testing.T) {
			state, secrets := t.TempDir(), secretsDir(t, c)
			log := &sanity.LogBuffer{}
			logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
			cfg := kind.config(t, c, log.Bytes)
			target := sanity.Restartable(func() (any, csikit.Options, error) {
				d, err := driver.New(driver.Options{
					Monitors: c.Monitors, DefaultPool: c.Pool, NodeID: "sanity-node", StateDir: state,
					Mapper: driver.MapperFUSE, MaxCloneDepth: 1, Logger: logger,
					SecretsDir: secrets, RequireNodeRegistration: true,
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
			dir, secrets := t.TempDir(), secretsDir(t, c)
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
					"--mapper", "rbd-fuse", "--max-clone-depth", "1", "--log-level", "debug",
					"--secrets-dir", secrets, "--require-node-registration")
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

// TestBackendObjects checks the harness's view of the rbd backend in a
// pool of the test's own: nothing in a fresh pool; an image, its
// snapshot, an image in the trash and a committed journal record (named
// by the CSI name and ID in its omap) while they exist; an uncommitted
// reservation never; nothing once everything is removed.
func TestBackendObjects(t *testing.T) {
	c := cephtest.Require(t)
	conn := cephtest.Admin(t, c)
	pool := cephtest.NewPool(t, conn)
	list := cephtest.BackendObjects(conn, pool, driver.JournalNamespace)
	objects := func() []string {
		t.Helper()
		got, err := list(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := objects(); len(got) != 0 {
		t.Fatalf("got %q in a fresh pool, want nothing", got)
	}
	io, err := conn.OpenIOContext(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer io.Destroy()
	for _, name := range []string{"img", "trashed"} {
		if err := rbd.CreateImage(io, name, 1<<20, rbd.NewRbdImageOptions()); err != nil {
			t.Fatal(err)
		}
	}
	img, err := rbd.OpenImage(io, "img", rbd.NoSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := img.CreateSnapshot("snap")
	if err != nil {
		t.Fatal(err)
	}
	trashed, err := rbd.OpenImage(io, "trashed", rbd.NoSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	if err := trashed.Trash(0); err != nil {
		t.Fatal(err)
	}
	jio, err := conn.OpenIOContext(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer jio.Destroy()
	jio.SetNamespace(driver.JournalNamespace)
	records := map[string]map[string][]byte{
		"volume.name.aa": {"name": []byte("pvc-1"), "id": []byte("1-vol"), "committed": []byte("1")},
		"volume.id.bb":   {"name": []byte("pvc-1")},
		"volume.name.cc": {"name": []byte("pvc-2"), "id": []byte("1-pending")}, // an uncommitted reservation
		"volume.id.dd":   {"name": []byte("pvc-2")},
	}
	for oid, m := range records {
		if err := jio.SetOmap(oid, m); err != nil {
			t.Fatal(err)
		}
	}
	trash, err := rbd.GetTrashList(io)
	if err != nil || len(trash) != 1 {
		t.Fatalf("trash list: %v %v", trash, err)
	}
	want := []string{
		`image img`, `journal volume.id.bb name="pvc-1"`, `journal volume.name.aa name="pvc-1" id="1-vol"`,
		`snapshot img@snap`, `trash trashed ` + trash[0].Id,
	}
	if got := objects(); !slices.Equal(got, want) {
		t.Errorf("got objects\n\t%q\nwant\n\t%q", got, want)
	}
	if err := snap.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}
	if err := trashed.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rbd.RemoveImage(io, "img"); err != nil {
		t.Fatal(err)
	}
	if err := rbd.TrashRemove(io, trash[0].Id, true); err != nil {
		t.Fatal(err)
	}
	for oid := range records {
		if err := jio.Delete(oid); err != nil {
			t.Fatal(err)
		}
	}
	if got := objects(); len(got) != 0 {
		t.Errorf("got %q after everything was removed, want nothing", got)
	}
}
