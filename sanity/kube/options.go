package kube

import "time"

// Options configure Start. DriverName is required, and Endpoint unless
// Sidecars is empty.
type Options struct {
	// Endpoint is the driver's CSI endpoint: unix:///abs/path.sock or an
	// absolute socket path. The driver must be serving (or start serving
	// soon: sidecars retry) and answer GetPluginInfo with a non-empty
	// vendor_version. With Sidecars empty (non-nil) it may be empty: the
	// environment then runs no sidecar, e.g. for a driver deployed with its
	// own manifests in the kubelet mode.
	Endpoint string
	// DriverName is the driver's GetPluginInfo name, used as the
	// StorageClass provisioner and in CSINode.
	DriverName string
	// NodeName is the name of the fake Node the environment registers
	// (default "node-1"). NodeID is the driver's node ID on that node,
	// written to CSINode (default NodeName).
	NodeName string
	NodeID   string
	// NodeTopology are the labels of the fake Node, also registered as the
	// driver's topology keys in CSINode (e.g. {"topology.example/zone": "a"}).
	NodeTopology map[string]string

	// BinDir holds prebuilt binaries (etcd as "server", kube-apiserver,
	// kube-controller-manager, csi-provisioner, csi-attacher, csi-resizer,
	// csi-snapshotter, snapshot-controller). Empty: EnsureBinaries builds
	// them from this module's tool block into the user cache directory.
	BinDir string
	// CRDDir holds the VolumeSnapshot and VolumeGroupSnapshot CRDs
	// (*.yaml). Empty: the config/crd directory of the
	// external-snapshotter client module in the module cache.
	CRDDir string

	// Sidecars lists which sidecars to run (nil: all four,
	// "csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter";
	// empty: none).
	Sidecars []string
	// Timeout is each sidecar's --timeout for CSI calls (default 10s).
	Timeout time.Duration
	// ExtraArgs adds flags per process name (e.g. "csi-provisioner").
	ExtraArgs map[string][]string
	// Driver, when set, is a driver binary the environment runs as one of
	// its processes (StartProcess with these options): started before the
	// control plane, its log in Dir (when LogDir is empty) with its tail
	// printed when the test fails, stopped after the sidecars on Cleanup,
	// and reachable as Process(Driver.Name) to kill or inspect. Its Args
	// must make it serve Endpoint. Leave it nil for a driver served
	// in-process (ServeDriver) or one the test runs itself.
	Driver *ProcessOptions
	// Kubelet, when set, turns on the kubelet mode: a real node (containerd,
	// kubelet, kube-scheduler) instead of the fake Node, so pods run and the
	// driver's node side is called by kubelet. See KubeletOptions.
	Kubelet *KubeletOptions
	// StopGrace is how long a process gets after SIGTERM before SIGKILL
	// (default 3s; kube-apiserver ignores SIGTERM for longer).
	StopGrace time.Duration
}

// AllSidecars returns the sidecars Start runs by default.
func AllSidecars() []string {
	return []string{"csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter"}
}

func (o *Options) defaults() {
	if o.NodeName == "" {
		o.NodeName = "node-1"
	}
	if o.NodeID == "" {
		o.NodeID = o.NodeName
	}
	if o.Sidecars == nil {
		o.Sidecars = AllSidecars()
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 3 * time.Second
	}
}
