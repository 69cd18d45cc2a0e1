package driver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rados"
	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
)

func newDriver(t testing.TB, c cephtest.Cluster, o driver.Options) *driver.Driver {
	t.Helper()
	o.Monitors, o.DefaultPool = c.Monitors, c.Pool
	if o.StateDir == "" {
		o.StateDir = t.TempDir()
	}
	d, err := driver.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// adminlessIO opens the test pool with the test user.
func adminlessIO(t *testing.T, c cephtest.Cluster) *rados.IOContext {
	t.Helper()
	pool := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	t.Cleanup(pool.Close)
	io, done, err := pool.IOContext(context.Background(), driver.Credentials{User: c.User, Key: c.Key}, c.Pool, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(done)
	return io
}

// localOf is the part of volume ID id after its pool: its image is
// csi-vol-<local>, a volume clone's temporary snapshot csi-clone-<local>.
func localOf(id string) string { return id[strings.IndexByte(id, '-')+1:] }

var mountCap = []*csi.VolumeCapability{{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}}

// poolID finds the pool's numeric ID the way the journal would, through a
// reservation (the ID's prefix).
func reservedVolumeID(t testing.TB, d *driver.Driver, c cephtest.Cluster, r *csi.CreateVolumeRequest) (context.Context, string) {
	t.Helper()
	ctx := journal.ContextWithRequest(context.Background(), r)
	rec, err := d.Journal().Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: r.GetName(), ID: journal.RandomID("")})
	if err != nil {
		t.Fatal(err)
	}
	return journal.ContextWithReservedID(ctx, rec.ID), rec.ID
}

func TestControllerLifecycle(t *testing.T) {
	c := cephtest.Require(t)
	d := newDriver(t, c, driver.Options{MaxCloneDepth: 1})
	req := &csi.CreateVolumeRequest{
		Name: "life-" + journal.RandomID(""), VolumeCapabilities: mountCap, Secrets: c.Secrets(),
		CapacityRange: &csi.CapacityRange{RequiredBytes: 5 << 20},
	}
	ctx, id := reservedVolumeID(t, d, c, req)
	start := time.Now()
	resp, err := d.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("create %v", time.Since(start))
	if resp.GetVolume().GetVolumeId() != id || resp.GetVolume().GetCapacityBytes() != 5<<20 {
		t.Fatalf("CreateVolume = %v, want ID %s and 5 MiB", resp, id)
	}
	// Again: the same answer (a retry), sized from the image the first
	// call made.
	if again, err := d.CreateVolume(ctx, req); err != nil || again.GetVolume().GetVolumeId() != id || again.GetVolume().GetCapacityBytes() != 5<<20 {
		t.Fatalf("retried CreateVolume = %v, %v", again, err)
	}
	// A call under the same reservation whose range the made image does
	// not fit: the create finds the name taken, and the image's own size
	// (not the request's) decides.
	small := &csi.CreateVolumeRequest{
		Name: req.Name, VolumeCapabilities: mountCap, Secrets: c.Secrets(),
		CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 20, LimitBytes: 3 << 20},
	}
	if got, err := d.CreateVolume(ctx, small); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("CreateVolume of 2-3 MiB over the 5 MiB image = %v, %v; want AlreadyExists", got, err)
	}
	start = time.Now()
	if _, err := d.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: id, Secrets: c.Secrets()}); err != nil {
		t.Fatal(err)
	}
	t.Logf("delete %v", time.Since(start))
	if _, err := d.ControllerExpandVolume(context.Background(), &csi.ControllerExpandVolumeRequest{VolumeId: id, Secrets: c.Secrets(), CapacityRange: &csi.CapacityRange{RequiredBytes: 10 << 20}}); status.Code(err) != codes.NotFound {
		t.Fatalf("expand after delete: %v, want NotFound", err)
	}
	_ = d.Journal().Release(ctx, journal.KindVolume, id)
}

// TestImageFeatures checks that a StorageClass without imageFeatures gets
// DefaultImageFeatures (object-map included, so removes skip unwritten
// objects) and that one naming features gets exactly those plus layering.
func TestImageFeatures(t *testing.T) {
	c := cephtest.Require(t)
	d := newDriver(t, c, driver.Options{})
	io := adminlessIO(t, c)
	for _, tc := range []struct{ param, want string }{
		{"", "layering,exclusive-lock,object-map,fast-diff,deep-flatten"},
		{"exclusive-lock", "layering,exclusive-lock"},
	} {
		req := &csi.CreateVolumeRequest{
			Name: "feat-" + journal.RandomID(""), VolumeCapabilities: mountCap, Secrets: c.Secrets(),
			CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20},
		}
		if tc.param != "" {
			req.Parameters = map[string]string{driver.ParamImageFeatures: tc.param}
		}
		ctx, id := reservedVolumeID(t, d, c, req)
		if _, err := d.CreateVolume(ctx, req); err != nil {
			t.Fatalf("imageFeatures %q: %v", tc.param, err)
		}
		img, err := rbd.OpenImageReadOnly(io, "csi-vol-"+localOf(id), rbd.NoSnapshot)
		if err != nil {
			t.Fatal(err)
		}
		got, err := img.GetFeatures()
		_ = img.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(rbd.FeatureSetFromNames(strings.Split(tc.want, ","))); got != want {
			gotSet := rbd.FeatureSet(got)
			t.Errorf("imageFeatures %q: image has features %v, want %s", tc.param, gotSet.Names(), tc.want)
		}
		if _, err := d.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: id, Secrets: c.Secrets()}); err != nil {
			t.Fatal(err)
		}
		_ = d.Journal().Release(ctx, journal.KindVolume, id)
	}
}
