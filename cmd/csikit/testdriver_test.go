//go:build linux

package main_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/mount"
)

// TestTestDriverHostpath: the test-driver file csikit derives over the
// endpoint carries what only the running driver knows (its name, the
// topology key of NodeGetInfo, snapshots, clones and both expansions) and
// the options for what CSI does not show.
func TestTestDriverHostpath(t *testing.T) {
	p := hostpath(t)
	r := csikit(t, "testdriver", p.Endpoint, "--storage-class", "/deploy/sc.yaml", "--block", "--fs-types", ",ext4",
		"--fs-type", "ext4", "--access-modes", "SINGLE_NODE_WRITER,SINGLE_NODE_SINGLE_WRITER", "--multiple-pvs-same-id", "--suite-timeout", "PodStart=10m").want(t, 0)
	for _, s := range []string{"  FromFile: \"/deploy/sc.yaml\"\n", "  Name: \"hostpath.csikit.dev\"\n",
		"  TopologyKeys: [\"topology.hostpath.csikit.dev/node\"]\n", "    \"ext4\": {}\n",
		"    block: true\n", "    fsGroup: true\n", "    snapshotDataSource: true\n", "    pvcDataSource: true\n",
		"    controllerExpansion: true\n", "    nodeExpansion: true\n", "    readWriteOncePod: true\n", "    RWX: false\n", "    multiplePVsSameID: true\n",
		"    topology: true\n", "  \"PodStart\": \"10m\"\n"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("got no %q in:\n%s", s, r.stdout)
		}
	}
	csikit(t, "testdriver", p.Endpoint, "--access-modes", "EVERYONE").want(t, 2)
	csikit(t, "testdriver", p.Endpoint, "--fs-group-policy", "Sometimes").want(t, 1)
}

// TestTestDriverSizeMin: without --size-min the smallest claim is the
// smallest file system mkfs makes of the types the suite may ask for (a
// driver cannot make an xfs volume smaller: the suite's restore and clone
// claims ask for that size and are refused below their source's), 1Mi
// for types that fit in it; --size-min overrides it.
func TestTestDriverSizeMin(t *testing.T) {
	testenv.RequireCommand(t, "mkfs.xfs", "xfsprogs")
	p := hostpath(t)
	min, err := mount.New(mount.Options{}).MinSize(context.Background(), "xfs")
	if err != nil {
		t.Fatal(err)
	}
	if min <= 1<<20 {
		t.Fatalf("mkfs.xfs makes a file system of %d bytes: want more than 1 MiB for this test", min)
	}
	xfs := fmt.Sprintf("    Min: \"%dMi\"\n", min>>20)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--fs-types", ",xfs", "--fs-type", "xfs"}, xfs},
		{[]string{"--fs-types", ",ext4,xfs"}, xfs},
		{[]string{"--fs-type", "xfs"}, xfs},
		{[]string{"--fs-types", ",ext4", "--fs-type", "ext4"}, "    Min: \"1Mi\"\n"},
		{nil, "    Min: \"1Mi\"\n"},
		{[]string{"--fs-types", ",xfs", "--size-min", "1Gi"}, "    Min: \"1Gi\"\n"},
	} {
		r := csikit(t, append([]string{"testdriver", p.Endpoint}, c.args...)...).want(t, 0)
		if !strings.Contains(r.stdout, c.want) {
			t.Errorf("testdriver %s: got no %q in:\n%s", strings.Join(c.args, " "), c.want, r.stdout)
		}
	}
	csikit(t, "testdriver", p.Endpoint, "--fs-types", ",no/such").want(t, 1)
}
