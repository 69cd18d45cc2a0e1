//go:build linux

package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rados"
	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// driverBinary builds the driver once per test binary.
func driverBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "rbd-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "rbd")
		out, err := exec.Command("go", "build", "-tags", "pacific", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// scratchPool makes a pool of the test's own with the admin key, so the
// test can count every image and journal object in it; it is deleted at
// the end. It returns the pool and the admin's CSI secrets.
func scratchPool(t *testing.T, c cephtest.Cluster) (string, map[string]string) {
	t.Helper()
	return cephtest.NewPool(t, cephtest.Admin(t, c)), cephtest.AdminSecrets(t, c)
}

// poolImages lists the CSI images of pool.
func poolImages(t *testing.T, c cephtest.Cluster, secrets map[string]string, pool string) map[string]bool {
	t.Helper()
	conn, _ := rados.NewConnWithUser(secrets["userID"])
	_ = conn.SetConfigOption("mon_host", c.Monitors)
	_ = conn.SetConfigOption("key", secrets["userKey"])
	_ = conn.SetConfigOption("admin_socket", "")
	if err := conn.Connect(); err != nil {
		t.Fatal(err)
	}
	defer conn.Shutdown()
	io, err := conn.OpenIOContext(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer io.Destroy()
	names, err := rbd.GetImageNames(io)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// proc is one controller process.
type proc struct {
	cmd  *exec.Cmd
	ctrl csi.ControllerClient
	conn *grpc.ClientConn
}

func startDriver(t *testing.T, c cephtest.Cluster, pool, dir string) *proc {
	t.Helper()
	sock := filepath.Join(dir, "csi.sock")
	_ = os.Remove(sock)
	cmd := exec.Command(driverBinary(t), "--endpoint", "unix://"+sock, "--nodeid", "replica",
		"--monitors", c.Monitors, "--pool", pool, "--state-dir", filepath.Join(dir, "state"), "--log-level", "error")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd}
	t.Cleanup(p.kill)
	for deadline := time.Now().Add(20 * time.Second); ; {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("driver socket never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p.conn, p.ctrl = conn, csi.NewControllerClient(conn)
	return p
}

func (p *proc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
	if p.conn != nil {
		_ = p.conn.Close()
	}
}

func createReq(name, pool string, secrets map[string]string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name: name, Secrets: secrets, Parameters: map[string]string{"pool": pool},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	}
}

// createUntilDone retries while the driver answers Aborted or Unavailable.
func createUntilDone(ctx context.Context, ctrl csi.ControllerClient, r *csi.CreateVolumeRequest) (string, error) {
	for {
		resp, err := ctrl.CreateVolume(ctx, r)
		if err == nil {
			return resp.GetVolume().GetVolumeId(), nil
		}
		if c := status.Code(err); c != codes.Aborted && c != codes.Unavailable {
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestTwoReplicasRace runs two controller processes on one pool and sends
// every CreateVolume to both at once: both answer the same volume, and the
// pool holds exactly one image per name.
func TestTwoReplicasRace(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := scratchPool(t, c)
	a, b := startDriver(t, c, pool, t.TempDir()), startDriver(t, c, pool, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const names = 20
	want := map[string]bool{}
	for i := range names {
		name := fmt.Sprintf("race-%d", i)
		var ids [2]string
		var errs [2]error
		var wg sync.WaitGroup
		for j, p := range []*proc{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids[j], errs[j] = createUntilDone(ctx, p.ctrl, createReq(name, pool, secrets))
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("%s: %v, %v", name, errs[0], errs[1])
		}
		if ids[0] != ids[1] {
			t.Fatalf("%s: the replicas created %s and %s", name, ids[0], ids[1])
		}
		want["csi-vol-"+ids[0][strings.IndexByte(ids[0], '-')+1:]] = true
	}
	got := poolImages(t, c, secrets, pool)
	if len(got) != len(want) {
		t.Fatalf("pool holds %d images for %d names: %v", len(got), len(want), got)
	}
	for n := range want {
		if !got[n] {
			t.Fatalf("image %s missing; pool holds %v", n, got)
		}
	}
}

// TestKillDashNineMidCreate SIGKILLs a controller while 8 clients create
// volumes, then lets a second replica (and a restarted first one) retry
// every name: each name ends with exactly one image, the pool holds nothing
// else, and no reservation stays uncommitted.
func TestKillDashNineMidCreate(t *testing.T) {
	c := cephtest.Require(t)
	if testing.Short() {
		t.Skip("builds and kills the driver binary; skipped with -short")
	}
	pool, secrets := scratchPool(t, c)
	dirA, dirB := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	names := map[string]bool{}
	for round := range 3 {
		p := startDriver(t, c, pool, dirA)
		var wg sync.WaitGroup
		for cl := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 5 {
					// Errors are expected: the driver dies under us.
					_, _ = p.ctrl.CreateVolume(ctx, createReq(fmt.Sprintf("r%d-c%d-v%d", round, cl, i), pool, secrets))
				}
			}()
			for i := range 5 {
				names[fmt.Sprintf("r%d-c%d-v%d", round, cl, i)] = true
			}
		}
		time.Sleep(time.Duration(150+250*round) * time.Millisecond)
		p.kill()
		wg.Wait()
	}
	// What the kills left: reservations never committed (the path under
	// test) — logged, since where a kill lands is timing.
	creds := driver.Credentials{User: secrets["userID"], Key: secrets["userKey"]}
	conns := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	defer conns.Close()
	j := driver.NewOmapJournal(conns, creds, pool)
	if recs, err := j.Uncommitted(ctx, journal.KindVolume, time.Now()); err == nil {
		t.Logf("after the kills: %d of %d names hold an uncommitted reservation, %d images exist", len(recs), len(names), len(poolImages(t, c, secrets, pool)))
	}
	// The other replica completes what the dead one reserved.
	b := startDriver(t, c, pool, dirB)
	a := startDriver(t, c, pool, dirA)
	want := map[string]bool{}
	i := 0
	for name := range names {
		p := []*proc{a, b}[i%2]
		i++
		id, err := createUntilDone(ctx, p.ctrl, createReq(name, pool, secrets))
		if err != nil {
			t.Fatalf("retry of %s: %v", name, err)
		}
		again, err := createUntilDone(ctx, []*proc{a, b}[i%2].ctrl, createReq(name, pool, secrets))
		if err != nil || again != id {
			t.Fatalf("second retry of %s on the other replica: %q, %v; want %q", name, again, err, id)
		}
		want["csi-vol-"+id[strings.IndexByte(id, '-')+1:]] = true
	}
	if len(want) != len(names) {
		t.Fatalf("%d distinct volumes for %d names", len(want), len(names))
	}
	got := poolImages(t, c, secrets, pool)
	for n := range got {
		if !want[n] {
			t.Errorf("image %s belongs to no name: left over by a killed create", n)
		}
	}
	for n := range want {
		if !got[n] {
			t.Errorf("image %s of a committed name is missing", n)
		}
	}
	if recs, err := j.Uncommitted(ctx, journal.KindVolume, time.Now()); err != nil || len(recs) != 0 {
		t.Errorf("after the retries: %d uncommitted reservations (%v), want 0", len(recs), err)
	}
}

// TestReplicaCompletesReservation leaves a reservation exactly as a replica
// killed between reserve and commit would (written straight into the pool's
// omap journal), and checks that another replica's retry of the create
// completes it under the reserved ID, with one image and the reservation
// committed.
func TestReplicaCompletesReservation(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := scratchPool(t, c)
	creds := driver.Credentials{User: secrets["userID"], Key: secrets["userKey"]}
	conns := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	defer conns.Close()
	conn, done, err := conns.Conn(context.Background(), creds)
	if err != nil {
		t.Fatal(err)
	}
	poolID, err := conn.GetPoolByName(pool)
	done()
	if err != nil {
		t.Fatal(err)
	}
	req := createReq("half-made", pool, secrets)
	fp, _ := journal.Fingerprint(req)
	j := driver.NewOmapJournal(conns, creds, pool)
	reserved := fmt.Sprintf("%d-m%s", poolID, journal.RandomID("")) // a mount volume
	if _, err := j.Reserve(context.Background(), journal.Reservation{Kind: journal.KindVolume, Name: req.Name, Fingerprint: fp, ID: reserved}); err != nil {
		t.Fatal(err)
	}
	b := startDriver(t, c, pool, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := createUntilDone(ctx, b.ctrl, req)
	if err != nil {
		t.Fatal(err)
	}
	if id != reserved {
		t.Fatalf("the surviving replica created %s, want the dead one's reservation %s", id, reserved)
	}
	rec, ok, err := j.LookupName(ctx, journal.KindVolume, req.Name)
	if err != nil || !ok || !rec.Committed {
		t.Fatalf("reservation after the retry: %+v, %v, %v; want committed", rec, ok, err)
	}
	if got := poolImages(t, c, secrets, pool); len(got) != 1 {
		t.Fatalf("pool holds %v, want one image", got)
	}
}
