package testdriver_test

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/k8s/testdriver"
)

func ctrl(ts ...csi.ControllerServiceCapability_RPC_Type) []*csi.ControllerServiceCapability {
	var out []*csi.ControllerServiceCapability
	for _, t := range ts {
		out = append(out, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return out
}

func node(ts ...csi.NodeServiceCapability_RPC_Type) []*csi.NodeServiceCapability {
	var out []*csi.NodeServiceCapability
	for _, t := range ts {
		out = append(out, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return out
}

func service(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
	return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
}

func expansion(t csi.PluginCapability_VolumeExpansion_Type) *csi.PluginCapability {
	return &csi.PluginCapability{Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: t}}}
}

// TestFromCapabilities: each suite capability follows the CSI capability
// or option it stands for, and nothing else.
func TestFromCapabilities(t *testing.T) {
	full := testdriver.Capabilities{
		Plugin: []*csi.PluginCapability{service(csi.PluginCapability_Service_CONTROLLER_SERVICE),
			service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS), expansion(csi.PluginCapability_VolumeExpansion_OFFLINE)},
		Controller: ctrl(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
			csi.ControllerServiceCapability_RPC_CLONE_VOLUME, csi.ControllerServiceCapability_RPC_EXPAND_VOLUME),
		Node: node(csi.NodeServiceCapability_RPC_EXPAND_VOLUME, csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP),
	}
	snmw := testdriver.Capabilities{Controller: ctrl(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER),
		Node: node(csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)}
	for _, c := range []struct {
		name string
		caps testdriver.Capabilities
		opts testdriver.Options
		want map[testdriver.Capability]bool
	}{
		{"nothing", testdriver.Capabilities{}, testdriver.Options{}, map[testdriver.Capability]bool{
			testdriver.Persistence: false, testdriver.SnapshotDataSource: false, testdriver.ControllerExpansion: false,
			testdriver.OnlineExpansion: false, testdriver.OfflineExpansion: false, testdriver.Topology: false,
			testdriver.FSGroup: false, testdriver.Exec: true, testdriver.MultiPods: true, testdriver.Block: false,
			testdriver.RWX: false, testdriver.ReadWriteOncePod: true, testdriver.VolumeLimits: false, testdriver.MultiplePVsSameID: false}},
		{"full", full, testdriver.Options{Block: true, MaxVolumesPerNode: 3, TopologyKeys: []string{"zone"}, SingleNodeVolume: true,
			AccessModes: []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER,
				csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}},
			map[testdriver.Capability]bool{
				testdriver.Persistence: true, testdriver.SnapshotDataSource: true, testdriver.PVCDataSource: true,
				testdriver.ControllerExpansion: true, testdriver.NodeExpansion: true,
				testdriver.OnlineExpansion: false, testdriver.OfflineExpansion: true, // OFFLINE expansion
				testdriver.Topology: true, testdriver.VolumeMountGroup: true, testdriver.FSGroup: true,
				testdriver.Block: true, testdriver.RWX: true, testdriver.ReadOnlyMany: true, testdriver.ReadWriteOncePod: true,
				testdriver.VolumeLimits: true, testdriver.SingleNodeVolume: true}},
		// kubelet applies fsGroup under the default policy only to a
		// volume with an fsType, and always under File.
		{"fsgroup-fstype", testdriver.Capabilities{}, testdriver.Options{FSType: "ext4"}, map[testdriver.Capability]bool{testdriver.FSGroup: true}},
		{"fsgroup-file", testdriver.Capabilities{}, testdriver.Options{FSGroupPolicy: "File"}, map[testdriver.Capability]bool{testdriver.FSGroup: true}},
		{"fsgroup-none", testdriver.Capabilities{}, testdriver.Options{FSGroupPolicy: "None", FSType: "ext4"}, map[testdriver.Capability]bool{testdriver.FSGroup: false}},
		{"noexec", testdriver.Capabilities{}, testdriver.Options{NoExec: true}, map[testdriver.Capability]bool{testdriver.Exec: false}},
		{"multiple-pvs", testdriver.Capabilities{}, testdriver.Options{MultiplePVsSameID: true}, map[testdriver.Capability]bool{testdriver.MultiplePVsSameID: true}},
		// ReadWriteOncePod reaches a driver without SINGLE_NODE_MULTI_WRITER
		// as SINGLE_NODE_WRITER (csi-lib-utils' accessmodes, kubelet), and
		// one with it as SINGLE_NODE_SINGLE_WRITER, on each side.
		{"rwop-single-node-writer", testdriver.Capabilities{}, testdriver.Options{}, map[testdriver.Capability]bool{testdriver.ReadWriteOncePod: true}},
		{"rwop-multi-writer-without-single-writer", snmw, testdriver.Options{AccessModes: []csi.VolumeCapability_AccessMode_Mode{
			csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER}},
			map[testdriver.Capability]bool{testdriver.ReadWriteOncePod: false}},
		{"rwop-multi-writer", snmw, testdriver.Options{AccessModes: []csi.VolumeCapability_AccessMode_Mode{
			csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER}},
			map[testdriver.Capability]bool{testdriver.ReadWriteOncePod: true}},
		{"rwop-node-multi-writer-only", testdriver.Capabilities{Node: node(csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)},
			testdriver.Options{}, map[testdriver.Capability]bool{testdriver.ReadWriteOncePod: false}},
		{"rwop-read-only", testdriver.Capabilities{}, testdriver.Options{AccessModes: []csi.VolumeCapability_AccessMode_Mode{
			csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY}}, map[testdriver.Capability]bool{testdriver.ReadWriteOncePod: false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := testdriver.FromCapabilities("x.csikit.dev", c.caps, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range c.want {
				if d.Capabilities[k] != v {
					t.Errorf("%s = %v, want %v", k, d.Capabilities[k], v)
				}
			}
		})
	}
}

// TestFromCapabilitiesRefuses: options the capabilities contradict.
func TestFromCapabilitiesRefuses(t *testing.T) {
	yes := true
	for name, o := range map[string]testdriver.Options{
		"topology keys without VOLUME_ACCESSIBILITY_CONSTRAINTS": {TopologyKeys: []string{"zone"}},
		"capacity without GET_CAPACITY":                          {StorageCapacity: &yes},
		"unknown fsGroupPolicy":                                  {FSGroupPolicy: "Sometimes"},
	} {
		if _, err := testdriver.FromCapabilities("x.csikit.dev", testdriver.Capabilities{}, o); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want InvalidArgument", name, err)
		}
	}
	if _, err := testdriver.FromCapabilities("", testdriver.Capabilities{}, testdriver.Options{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("empty name: got %v, want InvalidArgument", err)
	}
}

// TestYAML pins the field names of the suite's driverDefinition
// (test/e2e/storage/external in Kubernetes v1.37), which reads the file.
func TestYAML(t *testing.T) {
	d, err := testdriver.FromCapabilities("x.csikit.dev", testdriver.Capabilities{
		Plugin:     []*csi.PluginCapability{service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)},
		Controller: ctrl(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT),
	}, testdriver.Options{StorageClassFile: "/tmp/s c.yaml", SnapshotClassFile: "/tmp/vsc.yaml", FSTypes: []string{"", "ext4"},
		TopologyKeys: []string{"zone"}, SizeMax: "1Gi", MountOptions: []string{"noatime"}, InlineVolumes: true, InlineAttributes: map[string]string{"size": "1Mi"},
		Timeouts: map[string]string{"PodStart": "10m"}})
	if err != nil {
		t.Fatal(err)
	}
	got := string(d.YAML())
	for _, want := range []string{
		"StorageClass:\n  FromFile: \"/tmp/s c.yaml\"\n",
		"SnapshotClass:\n  FromFile: \"/tmp/vsc.yaml\"\n",
		"DriverInfo:\n  Name: \"x.csikit.dev\"\n  SupportedSizeRange:\n    Min: \"1Mi\"\n    Max: \"1Gi\"\n",
		"  SupportedFsType:\n    \"\": {}\n    \"ext4\": {}\n  SupportedMountOption:\n    \"noatime\": {}\n",
		"  TopologyKeys: [\"zone\"]\n  NumAllowedTopologies: 1\n",
		"    snapshotDataSource: true\n", "    topology: true\n",
		"InlineVolumes:\n  - Shared: false\n    ReadOnly: false\n    Attributes:\n      \"size\": \"1Mi\"\n",
		"Timeouts:\n  \"PodStart\": \"10m\"\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	// Without snapshots no SnapshotClass; without a file the suite's own class.
	d, _ = testdriver.FromCapabilities("x.csikit.dev", testdriver.Capabilities{}, testdriver.Options{})
	if got := string(d.YAML()); strings.Contains(got, "SnapshotClass") || !strings.Contains(got, "StorageClass:\n  FromName: true\n") {
		t.Errorf("got:\n%s", got)
	}
}
