//go:build linux

package main_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rados"
	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
)

// watchHelperEnv makes the test binary a watcher (watchHelper) instead of
// running tests: "monitors|user|key|pool|object|seconds".
const watchHelperEnv = "CSIKIT_RBD_TEST_WATCH"

// watchHelper watches an object with a short timeout, says "watching" and
// waits to be killed: the watch then lingers on the OSD until the timeout,
// as a SIGKILLed controller's watch on an image it had open does.
func watchHelper(spec string) int {
	f := strings.Split(spec, "|")
	if len(f) != 6 {
		fmt.Fprintln(os.Stderr, "bad", watchHelperEnv)
		return 2
	}
	conn, err := rados.NewConnWithUser(f[1])
	if err == nil {
		for k, v := range map[string]string{"mon_host": f[0], "key": f[2], "keyring": "", "admin_socket": ""} {
			_ = conn.SetConfigOption(k, v)
		}
		err = conn.Connect()
	}
	var io *rados.IOContext
	if err == nil {
		io, err = conn.OpenIOContext(f[3])
	}
	var secs int
	_, _ = fmt.Sscan(f[5], &secs)
	if err == nil {
		_, err = io.WatchWithTimeout(f[4], time.Duration(secs)*time.Second)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "watch:", err)
		return 1
	}
	fmt.Println("watching")
	select {}
}

// deadWatcher leaves on image name of pool a watch whose client was
// SIGKILLed, expiring within about secs seconds.
func deadWatcher(t *testing.T, c cephtest.Cluster, secrets map[string]string, io *rados.IOContext, pool, name string, secs int) {
	t.Helper()
	img, err := rbd.OpenImageReadOnly(io, name, rbd.NoSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	id, err := img.GetId()
	_ = img.Close()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), watchHelperEnv+"="+strings.Join([]string{c.Monitors, secrets["userID"], secrets["userKey"], pool, "rbd_header." + id, fmt.Sprint(secs)}, "|"))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if line != "watching\n" {
		t.Fatalf("watch helper said %q", line)
	}
}

// TestDeleteWhileWatchExpires: DeleteVolume retried while a killed
// client's watch on a volume without snapshots or clones times out must
// never hide that volume as csi-del-… (it would stay for good, pinning
// its parent): it answers a retryable error until the watch is gone, then
// removes the image.
func TestDeleteWhileWatchExpires(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := scratchPool(t, c)
	p := startDriver(t, c, pool, t.TempDir())
	admin := cephtest.Admin(t, c)
	io, err := admin.OpenIOContext(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer io.Destroy()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	codesSeen := make([]map[codes.Code]int, n)
	for i := range n {
		resp, err := p.ctrl.CreateVolume(ctx, createReq(fmt.Sprintf("watched-%d", i), pool, secrets))
		if err != nil {
			t.Fatal(err)
		}
		vid := resp.GetVolume().GetVolumeId()
		deadWatcher(t, c, secrets, io, pool, "csi-vol-"+vid[strings.IndexByte(vid, '-')+1:], 1+i%3)
		codesSeen[i] = map[codes.Code]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Fast retries first (the window between the remove and the
			// look at watchers), then backing off like a CO's retries: a
			// header object hit every few milliseconds by 8 loops on a
			// loaded machine can keep the OSD from timing the dead watch
			// out (seen once in CI: one volume answered FailedPrecondition
			// 6518 times in 3 minutes).
			backoff := 2 * time.Millisecond
			for {
				_, err := p.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vid, Secrets: secrets})
				codesSeen[i][status.Code(err)]++
				switch status.Code(err) {
				case codes.OK:
					return
				case codes.FailedPrecondition, codes.Unavailable, codes.Aborted:
				default:
					errs[i] = err
					return
				}
				if ctx.Err() != nil {
					errs[i] = ctx.Err()
					return
				}
				time.Sleep(backoff)
				backoff = min(2*backoff, 500*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("volume %d: DeleteVolume = %v", i, err)
		}
	}
	t.Logf("answers while the watches expired: %v", codesSeen)
	if imgs := poolImages(t, c, secrets, pool); len(imgs) != 0 {
		t.Fatalf("after the deletes the pool holds %v; want nothing (a csi-del-… image has no snapshot or clone to wait for)", imgs)
	}
}
