//go:build linux

package kube

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCNIRoutesNodeIP: pods get a route to the kubernetes Service's
// ClusterIP and, when KubeletOptions.NodeIP is set, to the node's address
// (a backend a test runs on the host, e.g. examples/rbd's Ceph cluster,
// which a Deployment's pods must reach as pods of a cluster reach their
// node); nothing else (no default route: pods need no outside network).
func TestCNIRoutesNodeIP(t *testing.T) {
	for _, tc := range []struct {
		nodeIP string
		want   []string
	}{
		{"", []string{"10.0.0.1/32"}},
		{"192.0.2.2", []string{"10.0.0.1/32", "192.0.2.2/32"}},
	} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "cni", "net.d"), 0o700); err != nil {
			t.Fatal(err)
		}
		n := &node{opts: KubeletOptions{NodeIP: tc.nodeIP}, dir: dir, id: "x", bridge: "csikitx"}
		if err := n.writeRuntimeConfig("10.250.1.0/24", "10.0.0.1"); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "cni", "net.d", "10-csikit.conflist"))
		if err != nil {
			t.Fatal(err)
		}
		var conf struct {
			Plugins []struct {
				IPAM struct {
					Routes []struct{ Dst string } `json:"routes"`
				} `json:"ipam"`
			} `json:"plugins"`
		}
		if err := json.Unmarshal(b, &conf); err != nil {
			t.Fatalf("the CNI config: %v\n%s", err, b)
		}
		var got []string
		for _, r := range conf.Plugins[0].IPAM.Routes {
			got = append(got, r.Dst)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("NodeIP %q: pod routes %v, want %v", tc.nodeIP, got, tc.want)
		}
	}
}
