//go:build linux

package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rados"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/journal"
)

// secretsDir writes c's credentials as a mounted Secret holds them (one
// root-only file per key) and returns the directory.
func secretsDir(t *testing.T, c cephtest.Cluster) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "secret")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for k, v := range c.Secrets() {
		// kubectl create secret --from-file keeps a final newline.
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakeStage records, in volume vol's access object, that node staged it
// with a Ceph client at a made-up address (no process has it), and
// returns the address: a Fence then blocklists it as it would a hung
// node's client.
func fakeStage(t *testing.T, c cephtest.Cluster, vol, node string) string {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:0/%d", 1_000_000_000+rand.Uint32N(1_000_000_000))
	pool := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	defer pool.Close()
	io, done, err := pool.IOContext(context.Background(), driver.Credentials{User: c.User, Key: c.Key}, c.Pool, driver.AccessNamespace)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	v, _ := json.Marshal(map[string]any{"addrs": []string{addr}, "since": time.Now()})
	op := rados.CreateWriteOp()
	defer op.Release()
	op.SetOmap(map[string][]byte{"stage/" + node: v})
	if err := op.Operate(io, "csi-vol-"+localOf(vol), rados.OperationNoFlag); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestUnfenceAfterRestart: a controller restarted after a fence has no
// request's secrets to lift it with (csikit's Fencing service carries
// none, and secrets are never journaled); with standing credentials
// (Options.SecretsDir, a mounted Secret) Server.Unfence lifts the fence
// and releases csikit's record, with no request served since the start.
// Without them the answer says what to set.
func TestUnfenceAfterRestart(t *testing.T) {
	c := cephtest.Require(t)
	ctx := context.Background()
	ctl := newDriver(t, c, driver.Options{})
	vol := blockVolume(t, ctl, c, nil)
	t.Cleanup(func() {
		if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol, Secrets: c.Secrets()}); err != nil {
			t.Errorf("DeleteVolume: %v", err)
		}
	})
	addr := fakeStage(t, c, vol, "node-lost")
	// What csikit does at ControllerUnpublishVolume(vol, node-lost).
	rctx := journal.ContextWithRequest(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: "node-lost", Secrets: c.Secrets()})
	name := fmt.Sprintf("%d:%s%s", len(vol), vol, "node-lost")
	if _, err := ctl.Journal().Reserve(rctx, journal.Reservation{Kind: journal.KindFence, Name: name, ID: name}); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Fence(rctx, vol, "node-lost"); err != nil {
		t.Fatalf("Fence: %v", err)
	}
	if err := ctl.Journal().Commit(rctx, journal.KindFence, name, name, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(blocklisted(t, c), addr) {
		t.Fatalf("%s not blocklisted after Fence", addr)
	}

	bare := newDriver(t, c, driver.Options{}) // restarted, no --secrets-dir
	err := bare.Unfence(ctx, vol, "node-lost")
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "--secrets-dir") {
		t.Fatalf("Unfence after a restart without standing credentials = %v, want Unavailable naming --secrets-dir", err)
	}
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, driver.SecretUserID), []byte(c.User), 0o600); err != nil {
		t.Fatal(err)
	}
	hostile := "AQ\"B'\nkey = " + c.Key
	if err := os.WriteFile(filepath.Join(broken, driver.SecretUserKey), []byte(hostile), 0o600); err != nil {
		t.Fatal(err)
	}
	err = newDriver(t, c, driver.Options{SecretsDir: broken}).Unfence(ctx, vol, "node-lost")
	if status.Code(err) != codes.FailedPrecondition || strings.Contains(err.Error(), c.Key) || strings.Contains(err.Error(), "AQ\"B") {
		t.Fatalf("Unfence with a malformed key file = %v, want FailedPrecondition without the file's content", err)
	}

	ctl2 := newDriver(t, c, driver.Options{SecretsDir: secretsDir(t, c)}) // restarted
	srv, err := csikit.NewServer(ctl2.Service(), ctl2.ServerOptions(csikit.Options{Name: "rbd.csikit.dev", Version: "v0.0.0-test", NodeID: "controller"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Unfence(ctx, vol, "node-lost"); err != nil {
		t.Fatalf("Server.Unfence after a restart, standing credentials: %v", err)
	}
	if strings.Contains(blocklisted(t, c), addr) {
		t.Fatalf("%s still blocklisted after Unfence", addr)
	}
	rec := accessRecord(t, c, vol)
	if _, ok := rec["fence/node-lost"]; ok {
		t.Fatal("fence record left after Unfence")
	}
	if _, ok := rec["journal/node-lost"]; ok {
		t.Fatal("csikit's fence record left after Server.Unfence")
	}
}

// blocklistExpiry returns the expiry `osd blocklist ls` shows for addr,
// or false if addr is not listed.
func blocklistExpiry(t *testing.T, c cephtest.Cluster, addr string) (string, bool) {
	t.Helper()
	for _, l := range strings.Split(blocklisted(t, c), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == addr {
			return f[1], true
		}
	}
	return "", false
}

// TestFenceRenewal: a fence's blocklist entries outlive their expiry
// while the node stays fenced. A controller fences a made-up client with
// a 12 s expiry and stops; two restarted replicas, which serve no
// request but have standing credentials, run RenewFences side by side,
// find the fence and renew it before it lapses, one replica per renewal:
// three expiries later the entry is still listed, with a later expiry,
// and the record's time follows. (Ceph
// cannot extend an entry: a renewal removes and re-adds it, so for one
// OSD map epoch it is not listed; the driver logs how long.) Stopping
// the loop's context ends it; Unfence then lifts the renewed fence.
func TestFenceRenewal(t *testing.T) {
	c := cephtest.Require(t)
	ctx := context.Background()
	const expiry = 12 * time.Second
	ctl := newDriver(t, c, driver.Options{FenceExpiry: expiry})
	vol := blockVolume(t, ctl, c, nil)
	t.Cleanup(func() {
		if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol, Secrets: c.Secrets()}); err != nil {
			t.Errorf("DeleteVolume: %v", err)
		}
	})
	addr := fakeStage(t, c, vol, "node-hung")
	rctx := journal.ContextWithRequest(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: "node-hung", Secrets: c.Secrets()})
	if err := ctl.Fence(rctx, vol, "node-hung"); err != nil {
		t.Fatalf("Fence: %v", err)
	}
	first, ok := blocklistExpiry(t, c, addr)
	if !ok {
		t.Fatalf("%s not blocklisted after Fence", addr)
	}
	var rec0 struct{ Until time.Time }
	if err := json.Unmarshal([]byte(accessRecord(t, c, vol)["fence/node-hung"]), &rec0); err != nil {
		t.Fatal(err)
	}

	// Two controller replicas, restarted, renew side by side.
	var log testenv.SyncBuffer // written by the loops; read once they stopped
	logger := slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	secrets := secretsDir(t, c)
	ctl2 := newDriver(t, c, driver.Options{FenceExpiry: expiry, SecretsDir: secrets, Logger: logger.With("replica", 2)})
	ctl3 := newDriver(t, c, driver.Options{FenceExpiry: expiry, SecretsDir: secrets, Logger: logger.With("replica", 3)})
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- ctl2.RenewFences(lctx) }()
	go func() { done <- ctl3.RenewFences(lctx) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
			<-done
			<-done
		}
	})
	// Unrenewed, the entry is gone after one expiry (the monitor drops
	// expired entries at its next tick, every 5 s).
	time.Sleep(3 * expiry)
	last, ok := blocklistExpiry(t, c, addr)
	if !ok {
		t.Fatalf("%s is off the blocklist three expiries (%v) after the fence: not renewed", addr, expiry)
	}
	if last <= first {
		t.Fatalf("blocklist expiry of %s: %s after three expiries, %s at the fence: want later", addr, last, first)
	}
	var rec struct{ Until time.Time }
	if err := json.Unmarshal([]byte(accessRecord(t, c, vol)["fence/node-hung"]), &rec); err != nil {
		t.Fatal(err)
	}
	if !rec.Until.After(rec0.Until.Add(expiry)) {
		t.Fatalf("fence record until %v, at the fence %v: want renewed", rec.Until, rec0.Until)
	}
	t.Logf("blocklist expiry of %s: %s at the fence, %s three expiries later", addr, first, last)
	stop()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("RenewFences after its context ended: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("RenewFences still runs 10 s after its context ended")
		}
	}
	stopped = true
	// One renewer per renewal: a renewal moves the expiry a full expiry
	// ahead and the next is due only with half of it left, so two
	// renewals less than a quarter expiry apart are two replicas
	// renewing the same fence, each opening a moment without the entry.
	var times []time.Time
	for _, l := range strings.Split(log.String(), "\n") {
		var e struct {
			Time    time.Time `json:"time"`
			Msg     string    `json:"msg"`
			Replica int       `json:"replica"`
		}
		if json.Unmarshal([]byte(l), &e) != nil || !strings.HasPrefix(e.Msg, "renewing a fence") {
			continue
		}
		t.Logf("replica %d renews at %s", e.Replica, e.Time.Format(time.StampMilli))
		if n := len(times); n > 0 && e.Time.Sub(times[n-1]) < expiry/4 {
			t.Errorf("renewed %v after the previous renewal: two replicas renewed one fence", e.Time.Sub(times[n-1]))
		}
		times = append(times, e.Time)
	}
	if len(times) == 0 {
		t.Fatalf("no renewal logged:\n%s", log.String())
	}
	if strings.Contains(log.String(), c.Key) {
		t.Fatal("the key appears in the driver's log")
	}
	if err := ctl2.Unfence(ctx, vol, "node-hung"); err != nil {
		t.Fatalf("Unfence: %v", err)
	}
	if _, ok := blocklistExpiry(t, c, addr); ok {
		t.Fatalf("%s still blocklisted after Unfence", addr)
	}
}
