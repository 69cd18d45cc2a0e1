package cephtest

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/ceph/go-ceph/rados"
	"github.com/ceph/go-ceph/rbd"

	"github.com/csikit/csikit/journal"
)

// AdminSecrets are CSI secrets (userID, userKey) of client.admin, read
// from AdminKeyring.
func AdminSecrets(t testing.TB, c Cluster) map[string]string {
	t.Helper()
	kr, err := os.ReadFile(c.AdminKeyring)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`key = (\S+)`).FindSubmatch(kr)
	if m == nil {
		t.Fatal("no key in the admin keyring")
	}
	return map[string]string{"userID": "admin", "userKey": string(m[1])}
}

// Admin returns a connection as client.admin (key from AdminKeyring, no
// file handed to librados), shut down on t's Cleanup.
func Admin(t testing.TB, c Cluster) *rados.Conn {
	t.Helper()
	key := AdminSecrets(t, c)["userKey"]
	conn, err := rados.NewConnWithUser("admin")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"mon_host": c.Monitors, "key": key, "keyring": "", "admin_socket": ""} {
		if err := conn.SetConfigOption(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := conn.Connect(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Shutdown)
	return conn
}

// NewPool makes an rbd-initialized pool named t-<random> through conn,
// deleted on t's Cleanup (register it after conn's Shutdown).
func NewPool(t testing.TB, conn *rados.Conn) string {
	t.Helper()
	pool := "t-" + journal.RandomID("")[:12]
	if err := conn.MakePool(pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := conn.DeletePool(pool); err != nil {
			t.Errorf("delete pool %s: %v", pool, err)
		}
	})
	io, err := conn.OpenIOContext(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer io.Destroy()
	if err := rbd.PoolInit(io, true); err != nil {
		t.Fatal(err)
	}
	return pool
}

// TenantPool makes an rbd pool of the test's own and a Ceph user allowed
// only that pool (the caps deploy/secret.yaml documents), both removed on
// t's Cleanup. It returns the pool and the user's CSI secrets (userID,
// userKey). With its own pool a test can assert on every image, trash
// entry and journal object in it.
func TenantPool(t testing.TB, c Cluster) (string, map[string]string) {
	t.Helper()
	return tenantPool(t, c, "profile rbd")
}

// FencingTenantPool is TenantPool with the monitor caps of a driver that
// also lifts fences (Unfence: `osd blocklist rm`, which profile rbd does
// not allow), as README's "Node loss and fencing" documents and
// test/cluster.sh's user has.
func FencingTenantPool(t testing.TB, c Cluster) (string, map[string]string) {
	t.Helper()
	return tenantPool(t, c, `profile rbd, allow command "osd blocklist" with blocklistop=rm`)
}

// tenantPool makes the pool and a user with monCaps on the monitors and
// profile rbd on the pool.
func tenantPool(t testing.TB, c Cluster, monCaps string) (string, map[string]string) {
	t.Helper()
	conn := Admin(t, c)
	pool := NewPool(t, conn) // deleted after the user (Cleanup is LIFO)
	user := "u-" + pool
	entity := "client." + user
	out, err := monCommand(conn, map[string]any{"prefix": "auth get-or-create", "entity": entity, "format": "json",
		"caps": []string{"mon", monCaps, "osd", "profile rbd pool=" + pool, "mgr", "profile rbd pool=" + pool}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := monCommand(conn, map[string]any{"prefix": "auth del", "entity": entity}); err != nil {
			t.Errorf("delete user %s: %v", entity, err)
		}
	})
	var keys []struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(out, &keys); err != nil || len(keys) != 1 || keys[0].Key == "" {
		t.Fatalf("auth get-or-create %s: no key in the answer (%v)", entity, err)
	}
	return pool, map[string]string{"userID": user, "userKey": keys[0].Key}
}

func monCommand(conn *rados.Conn, cmd map[string]any) ([]byte, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	out, info, err := conn.MonCommand(b)
	if err != nil {
		return nil, fmt.Errorf("mon command %s: %w (%s)", cmd["prefix"], err, info)
	}
	return out, nil
}

// Contents is what a pool holds: image names (`rbd ls`), images in the
// RBD trash, and the objects of one RADOS namespace (the driver's journal).
type Contents struct {
	// Images are the pool's image names, sorted.
	Images []string
	// Trash are the names of the images in the pool's RBD trash, sorted.
	Trash []string
	// Objects are the object names in the namespace asked for, sorted.
	Objects []string
}

// Empty reports whether the pool holds no image, no trash and no object
// in the namespace.
func (c Contents) Empty() bool {
	return len(c.Images) == 0 && len(c.Trash) == 0 && len(c.Objects) == 0
}

// sizesIndex is the name of examples/rbd/driver's size index object
// (driver.sizesObject; the driver's own tests import this package).
const sizesIndex = "sizes.volume"

// PoolContents lists pool's images, trash and the objects of namespace
// (the size index only while it holds a size).
func PoolContents(t testing.TB, conn *rados.Conn, pool, namespace string) Contents {
	t.Helper()
	io, err := conn.OpenIOContext(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer io.Destroy()
	var c Contents
	if c.Images, err = rbd.GetImageNames(io); err != nil {
		t.Fatal(err)
	}
	trash, err := rbd.GetTrashList(io)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range trash {
		c.Trash = append(c.Trash, e.Name)
	}
	io.SetNamespace(namespace)
	if err := io.ListObjects(func(oid string) { c.Objects = append(c.Objects, oid) }); err != nil {
		t.Fatal(err)
	}
	// The driver's per-pool index of provisioned sizes (driver.sizesObject)
	// stays, like rbd_directory, once its last volume is gone: it is
	// content only while it holds a volume's size.
	c.Objects = slices.DeleteFunc(c.Objects, func(oid string) bool {
		if oid != sizesIndex {
			return false
		}
		kv, err := io.GetOmapValues(oid, "", "", 1)
		if err != nil {
			t.Fatal(err)
		}
		return len(kv) == 0
	})
	slices.Sort(c.Images)
	slices.Sort(c.Trash)
	slices.Sort(c.Objects)
	return c
}
