//go:build linux

package driver_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csitest/vmtest"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/fstree"
)

// The crash child: the test binary re-executed with these variables set
// serves the driver on a socket and SIGKILLs itself at its N-th step.
const (
	crashEnvState = "HOSTPATH_CRASH_STATE"
	crashEnvSock  = "HOSTPATH_CRASH_SOCK"
	crashEnvAt    = "HOSTPATH_CRASH_AT"
	crashEnvCap   = "HOSTPATH_CRASH_CAPACITY"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashEnvState) != "" {
		crashChild()
		return
	}
	os.Exit(vmtest.Main(m)) // powers off the VM the tests that need one share
}

// vmOptions is the VM of the tests that need Debian's kernel (vmtest):
// project quotas, ext4 and xfs grown online, dm-crypt. One VM for all of
// them: vmtest runs one VM at a time, and these tests' file order
// (encrypt, onlinegrow, quota, sanity_encrypt) alternated between two
// configurations, three boots under TCG instead of one.
var vmOptions = vmtest.Options{Modules: []string{"loop", "xfs", "ext4", "quota_v2", "dm-crypt"}}

// crashChild serves the driver as serve does, counting Step calls, and
// kills itself with SIGKILL — no cleanup, no flush — at the N-th. It
// returns on SIGTERM.
func crashChild() {
	at, _ := strconv.Atoi(os.Getenv(crashEnvAt))
	capacity, _ := strconv.ParseInt(os.Getenv(crashEnvCap), 10, 64)
	n := 0
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	opts := driver.Options{StateDir: os.Getenv(crashEnvState), NodeID: "test-node", Capacity: capacity,
		Step: func(step string) {
			n++
			if n == at {
				fmt.Fprintf(os.Stderr, "crash child: SIGKILL at step %d, %s\n", n, step)
				unix.Kill(os.Getpid(), unix.SIGKILL)
				select {} // the signal is on its way
			}
		}}
	d, err := driver.New(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	defer d.Close()
	srv, err := csikit.NewServer(d, csikit.Options{
		Name: "hostpath.csikit.dev", Version: "test", NodeID: opts.NodeID, Disable: opts.Disabled(),
		VolumeModes: csikit.Mount | csikit.Block, AccessModes: driver.AccessModes(),
		Alpha: true, Clone: true, Journal: d.Journal(), LockKeys: d.LockKeys(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	if err := srv.ListenAndServe(ctx, "unix://"+os.Getenv(crashEnvSock)); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
}

// crashCase is one create-like RPC: setup makes what it needs (with the
// in-process driver), do calls it, want is how many volumes and snapshots
// it adds.
type crashCase struct {
	name          string
	setup         func(t *testing.T, s *served, state string) []string
	do            func(ctx context.Context, conn *grpc.ClientConn, ids []string) error
	wantVols      int
	wantSnapshots int
}

// fillVolume writes 1 MiB of data into a volume's directory or image.
func fillVolume(t *testing.T, s *served, state, id string, block bool) {
	t.Helper()
	data := bytes.Repeat([]byte("crash test data "), 1<<16)
	var p string
	if !block {
		p = filepath.Join(volDir(t, s, state, id), "data")
	}
	if block {
		f, err := os.OpenFile(filepath.Join(state, "images", id+".img"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(data, 1<<20); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func crashCases() []crashCase {
	createReq := func(name string, c *csi.VolumeCapability, src *csi.VolumeContentSource) *csi.CreateVolumeRequest {
		return &csi.CreateVolumeRequest{Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20},
			VolumeCapabilities: []*csi.VolumeCapability{c}, VolumeContentSource: src}
	}
	createVolumeAs := func(c *csi.VolumeCapability, src func(ids []string) *csi.VolumeContentSource) func(context.Context, *grpc.ClientConn, []string) error {
		return func(ctx context.Context, conn *grpc.ClientConn, ids []string) error {
			var s *csi.VolumeContentSource
			if src != nil {
				s = src(ids)
			}
			_, err := csi.NewControllerClient(conn).CreateVolume(ctx, createReq("crashed", c, s))
			return err
		}
	}
	createVolume := func(block bool, src func(ids []string) *csi.VolumeContentSource) func(context.Context, *grpc.ClientConn, []string) error {
		return createVolumeAs(capFor(block, ""), src)
	}
	srcVolume := func(block bool) func(*testing.T, *served, string) []string {
		return func(t *testing.T, s *served, state string) []string {
			id := createVol(t, s, fmt.Sprintf("src-%v", block), 4<<20, capFor(block, ""), nil)
			fillVolume(t, s, state, id, block)
			return []string{id}
		}
	}
	snapshot := func(ctx context.Context, conn *grpc.ClientConn, ids []string) error {
		_, err := csi.NewControllerClient(conn).CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "crashed", SourceVolumeId: ids[0]})
		return err
	}
	return []crashCase{
		{name: "volume", setup: func(*testing.T, *served, string) []string { return nil },
			do: createVolume(false, nil), wantVols: 1},
		{name: "block-volume", setup: func(*testing.T, *served, string) []string { return nil },
			do: createVolume(true, nil), wantVols: 1},
		{name: "ext4-volume", setup: func(*testing.T, *served, string) []string { return nil },
			do: createVolumeAs(capFor(false, "ext4"), nil), wantVols: 1},
		{name: "block-clone", setup: srcVolume(true),
			do: createVolume(true, func(ids []string) *csi.VolumeContentSource { return volumeSource(ids[0]) }), wantVols: 1},
		{name: "block-restore", setup: func(t *testing.T, s *served, state string) []string {
			id := srcVolume(true)(t, s, state)[0]
			x, err := s.ctl.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: "src-snap", SourceVolumeId: id})
			if err != nil {
				t.Fatal(err)
			}
			return []string{x.GetSnapshot().GetSnapshotId()}
		}, do: createVolume(true, func(ids []string) *csi.VolumeContentSource { return snapshotSource(ids[0]) }), wantVols: 1},
		{name: "clone", setup: srcVolume(false),
			do: createVolume(false, func(ids []string) *csi.VolumeContentSource { return volumeSource(ids[0]) }), wantVols: 1},
		{name: "restore", setup: func(t *testing.T, s *served, state string) []string {
			id := srcVolume(false)(t, s, state)[0]
			x, err := s.ctl.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: "src-snap", SourceVolumeId: id})
			if err != nil {
				t.Fatal(err)
			}
			return []string{x.GetSnapshot().GetSnapshotId()}
		}, do: createVolume(false, func(ids []string) *csi.VolumeContentSource { return snapshotSource(ids[0]) }), wantVols: 1},
		{name: "snapshot", setup: srcVolume(false), do: snapshot, wantSnapshots: 1},
		{name: "block-snapshot", setup: srcVolume(true), do: snapshot, wantSnapshots: 1},
		{name: "group-snapshot", setup: func(t *testing.T, s *served, state string) []string {
			return append(srcVolume(false)(t, s, state), srcVolume(true)(t, s, state)...)
		}, do: func(ctx context.Context, conn *grpc.ClientConn, ids []string) error {
			_, err := csi.NewGroupControllerClient(conn).CreateVolumeGroupSnapshot(ctx,
				&csi.CreateVolumeGroupSnapshotRequest{Name: "crashed", SourceVolumeIds: ids})
			return err
		}, wantSnapshots: 2},
	}
}

// TestCrashAtEveryCreateStep kills the driver (SIGKILL, in a child
// process) at every step of every create-like RPC — CreateVolume empty
// (directory, block, ext4), cloned and restored (directory and block),
// CreateSnapshot of both kinds,
// CreateVolumeGroupSnapshot — then restarts it and retries the call, as
// the CO does: the retry must succeed (never AlreadyExists, which is final
// for the CO), exactly one object must exist, the data directories must
// hold exactly the data of the listed objects (no stray copy), and the
// capacity ledger must charge exactly them. Each crash is also left
// unretried once: the sweep must then remove everything the create left
// and give its capacity back. Before the fix, a snapshot's retry after a
// crash between its copy's rename into place and the journal's commit
// answered AlreadyExists and deleted the complete copy.
func TestCrashAtEveryCreateStep(t *testing.T) {
	needRoot(t)
	const capacity = 64 << 20
	for _, c := range crashCases() {
		t.Run(c.name, func(t *testing.T) {
			for at := 1; ; at++ {
				if crashed := crashRun(t, c, at, capacity, true); !crashed {
					if at == 1 {
						t.Fatal("the call took no step")
					}
					t.Logf("%d steps", at-1)
					return
				}
				crashRun(t, c, at, capacity, false)
				if at > 20 {
					t.Fatal("more than 20 steps: the child never got past them")
				}
			}
		})
	}
}

// crashRun sets up c, runs it in a child killed at step at, restarts the
// driver in process and retries (retry) or sweeps. It reports whether the
// child crashed (false: the call completed before step at).
func crashRun(t *testing.T, c crashCase, at int, capacity int64, retry bool) bool {
	t.Helper()
	ctx := context.Background()
	dir := shortDir(t, "hpcr")
	state := filepath.Join(dir, "state")
	opts := driver.Options{StateDir: state, Capacity: capacity}
	s := serve(t, dir, opts)
	ids := c.setup(t, s, state)
	baseVols, baseSnaps := len(listVolumeIDs(t, s)), len(listSnapshotIDs(t, s))
	baseCap := availableCapacity(t, s)
	s.stop()

	sock := filepath.Join(dir, "child.sock")
	var stderr bytes.Buffer
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), crashEnvState+"="+state, crashEnvSock+"="+sock,
		crashEnvAt+"="+strconv.Itoa(at), crashEnvCap+"="+strconv.FormatInt(capacity, 10))
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for i := 0; ; i++ {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			break
		}
		if i == 500 {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("the crash child's socket never appeared\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	callErr := c.do(callCtx, conn, ids)
	cancel()
	conn.Close()
	// A call that answered took all its steps: the child did not crash.
	crashed := callErr != nil
	if !crashed {
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	} else {
		select {
		case err := <-exited:
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("crash child at step %d ended with %v, want SIGKILL\n%s", at, err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Fatalf("step %d: the call failed without a crash: %v\n%s", at, callErr, stderr.String())
		}
	}
	where := strings.TrimSpace(stderr.String())
	if !crashed {
		where = "no crash"
	}

	s = serve(t, dir, opts)
	defer s.stop()
	if crashed && !retry {
		// Never retried (the PVC was deleted): the sweep removes what the
		// create left and gives back its capacity.
		if _, err := s.d.SweepAbandoned(ctx, s.srv.Locks(), time.Nanosecond); err != nil {
			t.Errorf("%s, no retry: sweep: %v", where, err)
		}
		if v, x := len(listVolumeIDs(t, s)), len(listSnapshotIDs(t, s)); v != baseVols || x != baseSnaps {
			t.Errorf("%s, no retry, swept: %d volumes and %d snapshots, want the %d and %d of the set-up", where, v, x, baseVols, baseSnaps)
		}
		if got := availableCapacity(t, s); got != baseCap {
			t.Errorf("%s, no retry, swept: GetCapacity offers %d, want the %d before the call", where, got, baseCap)
		}
		checkDataMatchesObjects(t, s, state, capacity, where+", no retry, swept")
		return crashed
	}
	if crashed {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.do(rctx, s.conn, ids)
		cancel()
		if err != nil {
			t.Fatalf("%s: the retry after a restart answered %v, want success", where, err)
		}
	}
	if v, x := len(listVolumeIDs(t, s)), len(listSnapshotIDs(t, s)); v != baseVols+c.wantVols || x != baseSnaps+c.wantSnapshots {
		t.Errorf("%s: %d volumes and %d snapshots, want %d and %d", where, v, x, baseVols+c.wantVols, baseSnaps+c.wantSnapshots)
	}
	checkDataMatchesObjects(t, s, state, capacity, where)
	// Everything is committed: the sweep finds nothing to release.
	if n, err := s.d.SweepAbandoned(ctx, s.srv.Locks(), time.Nanosecond); n != 0 || err != nil {
		t.Errorf("%s: the sweep after a successful retry released %d reservations (%v), want none", where, n, err)
	}
	if v, x := len(listVolumeIDs(t, s)), len(listSnapshotIDs(t, s)); v != baseVols+c.wantVols || x != baseSnaps+c.wantSnapshots {
		t.Errorf("%s, swept: %d volumes and %d snapshots, want %d and %d", where, v, x, baseVols+c.wantVols, baseSnaps+c.wantSnapshots)
	}
	return crashed
}

// checkDataMatchesObjects: the data directories hold exactly the data of
// the listed volumes and snapshots — no stray or partial copy — and
// GetCapacity offers the capacity less exactly their charges (a volume's
// capacity, a snapshot's bytes on disk).
func checkDataMatchesObjects(t *testing.T, s *served, state string, capacity int64, where string) {
	t.Helper()
	ctx := context.Background()
	want := map[string]bool{}
	var charged int64
	vols, err := s.ctl.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range vols.GetEntries() {
		v := e.GetVolume()
		charged += v.GetCapacityBytes()
		if v.GetVolumeContext()["kind"] == "directory" {
			// A directory volume never staged has no directory yet
			// (Lazy); one made must be there.
			if !s.d.IsLazy(v.GetVolumeId()) {
				want["volumes/"+v.GetVolumeId()] = true
			}
		} else {
			want["images/"+v.GetVolumeId()+".img"] = true
		}
	}
	for _, id := range listSnapshotIDs(t, s) {
		p := "snapshots/" + id
		if u, err := fstree.Usage(ctx, filepath.Join(state, p)); err == nil {
			charged += u.Bytes
			want[p] = true
			continue
		}
		p += ".img"
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(state, p), &st); err != nil {
			t.Errorf("%s: snapshot %s has no data: %v", where, id, err)
			continue
		}
		charged += st.Blocks * 512
		want[p] = true
	}
	var got []string
	for _, sub := range []string{"volumes", "images", "snapshots"} {
		entries, err := os.ReadDir(filepath.Join(state, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			got = append(got, sub+"/"+e.Name())
		}
	}
	var wantList []string
	for p := range want {
		wantList = append(wantList, p)
	}
	sort.Strings(got)
	sort.Strings(wantList)
	if strings.Join(got, " ") != strings.Join(wantList, " ") {
		t.Errorf("%s: the data directories hold %q, want exactly the listed objects' %q", where, got, wantList)
	}
	if got, want := availableCapacity(t, s), capacity-charged; got != want {
		t.Errorf("%s: GetCapacity offers %d, want %d (the capacity less the %d bytes the objects are charged)", where, got, want, charged)
	}
}

// listSnapshotIDs lists every snapshot's ID.
func listSnapshotIDs(t *testing.T, s *served) []string {
	t.Helper()
	resp, err := s.ctl.ListSnapshots(context.Background(), &csi.ListSnapshotsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range resp.GetEntries() {
		ids = append(ids, e.GetSnapshot().GetSnapshotId())
	}
	return ids
}
