//go:build linux

package driver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rados"
	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
)

// A volume whose access object lists many nodes (a multi-node volume
// staged on 20: 40 attach/ and stage/ keys) still shows every one of
// them: Holds of the last node, whose keys sort after the first 16, is
// true, so its unpublish fences it rather than answering OK unfenced.
func TestHoldsManyNodes(t *testing.T) {
	c := cephtest.Require(t)
	ctx := context.Background()
	d := newDriver(t, c, driver.Options{})
	vol := blockVolume(t, d, c, nil)
	t.Cleanup(func() {
		if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol, Secrets: c.Secrets()}); err != nil {
			t.Errorf("DeleteVolume: %v", err)
		}
	})
	pool := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	t.Cleanup(pool.Close)
	io, done, err := pool.IOContext(ctx, driver.Credentials{User: c.User, Key: c.Key}, c.Pool, driver.AccessNamespace)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	vals := map[string][]byte{}
	for i := range 20 {
		n := fmt.Sprintf("node-%02d", i)
		vals["attach/"+n] = []byte(`{"readOnly":false}`)
		vals["stage/"+n] = []byte(fmt.Sprintf(`{"addrs":["127.0.0.1:0/%d"],"since":"2026-01-01T00:00:00Z"}`, 1000+i))
	}
	op := rados.CreateWriteOp()
	defer op.Release()
	op.SetOmap(vals)
	if err := op.Operate(io, "csi-vol-"+vol[strings.IndexByte(vol, '-')+1:], rados.OperationNoFlag); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node-00", "node-19"} {
		h, err := d.Holds(ctx, vol, n)
		if err != nil || !h {
			t.Fatalf("Holds(%s) = %v, %v; want true (staged, not fenced)", n, h, err)
		}
	}
}
