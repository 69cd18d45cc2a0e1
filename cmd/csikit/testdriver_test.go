//go:build linux

package main_test

import (
	"strings"
	"testing"
)

// TestTestDriverHostpath: the test-driver file csikit derives over the
// endpoint carries what only the running driver knows (its name, the
// topology key of NodeGetInfo, snapshots, clones and both expansions) and
// the options for what CSI does not show.
func TestTestDriverHostpath(t *testing.T) {
	p := hostpath(t)
	r := csikit(t, "testdriver", p.Endpoint, "--storage-class", "/deploy/sc.yaml", "--block", "--fs-types", ",ext4",
		"--fs-type", "ext4", "--access-modes", "SINGLE_NODE_WRITER,SINGLE_NODE_SINGLE_WRITER", "--suite-timeout", "PodStart=10m").want(t, 0)
	for _, s := range []string{"  FromFile: \"/deploy/sc.yaml\"\n", "  Name: \"hostpath.csikit.dev\"\n",
		"  TopologyKeys: [\"topology.hostpath.csikit.dev/node\"]\n", "    \"ext4\": {}\n",
		"    block: true\n", "    fsGroup: true\n", "    snapshotDataSource: true\n", "    pvcDataSource: true\n",
		"    controllerExpansion: true\n", "    nodeExpansion: true\n", "    readWriteOncePod: true\n", "    RWX: false\n",
		"    topology: true\n", "  \"PodStart\": \"10m\"\n"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("got no %q in:\n%s", s, r.stdout)
		}
	}
	csikit(t, "testdriver", p.Endpoint, "--access-modes", "EVERYONE").want(t, 2)
	csikit(t, "testdriver", p.Endpoint, "--fs-group-policy", "Sometimes").want(t, 1)
}
