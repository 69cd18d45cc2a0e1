package kube

import (
	"path/filepath"
	"time"
)

// Images the kubelet mode imports into containerd before kubelet starts.
const (
	// PauseImage is the sandbox image: a static Go program (internal/pause).
	PauseImage = "csikit.local/pause:1"
	// BusyboxImage holds the host's static busybox (Debian's busybox-static)
	// with one symlink per applet in /bin: the image for test workloads.
	BusyboxImage = "csikit.local/busybox:1"
)

// KubeletOptions turn on the kubelet mode (Options.Kubelet): besides the
// control plane, Start runs containerd (with runc and the CNI bridge
// plugin), a real kubelet for Options.NodeName and kube-scheduler, so pods
// run for real and the node side of the driver (NodeStage, NodePublish,
// NodeExpand, plugin registration) is exercised by Kubernetes itself.
//
// The mode is Linux only and needs root, runc, the CNI plugins bridge and
// host-local, and a static busybox (Debian: runc,
// containernetworking-plugins, busybox-static). Everything it creates on
// the host (directories, cgroups, network namespaces, a bridge, iptables
// chains, mounts) is removed on Cleanup, by PID and by exact path. One
// kubelet-mode environment runs per host at a time (kubelet's iptables
// chains and host directories are shared): Start waits for another to end
// (HostLockWait).
type KubeletOptions struct {
	// RuntimeBinDir holds containerd, containerd-shim-runc-v2 and ctr.
	// Empty: EnsureRuntimeBinaries builds containerd v2 from this module's
	// runtime/ tool block into the user cache directory.
	RuntimeBinDir string
	// Runc is the runc binary (default: runc on PATH).
	Runc string
	// CNIBinDir holds the CNI plugins bridge and host-local (default
	// /usr/lib/cni, Debian's containernetworking-plugins).
	CNIBinDir string
	// Busybox is a static busybox binary for BusyboxImage (default
	// /bin/busybox, Debian's busybox-static).
	Busybox string
	// Images are more image tarballs (e.g. from WriteImage) to import
	// before kubelet starts.
	Images []string
	// ReadyTimeout bounds containerd, kubelet and the Node becoming ready
	// (default 3m: the first start on a loaded machine is slow).
	ReadyTimeout time.Duration
	// NodeIP, when set, is the Node's InternalIP (kubelet --node-ip) and
	// the address kubelet's API listens on, with anonymous AlwaysAllow
	// auth: the API server then reaches kubelet for exec, attach, logs
	// and port-forward (kubectl exec; Kubernetes' e2e suites). Any process
	// that reaches that address can then run commands in the node's pods:
	// set it only on a machine you trust. Pods also get a route to it, so
	// they reach what listens on the host's address (e.g. a storage
	// backend a test runs there). Default: kubelet's API on
	// loopback only, and the Node's IP the one kubelet picks (the API
	// server cannot reach kubelet).
	NodeIP string
	// ExtraNodes are more nodes on the same host, each a kubelet with its
	// own containerd (a kubelet removes the containers of its runtime it
	// did not start), root, pod log and cgroup directories, bridge and pod
	// subnet, registering a Node of its own name: pods scheduled to them
	// run beside the first node's (Options.NodeName), e.g. to move a
	// volume from one node to another. The scheduler and the host's
	// iptables chains are shared. See KubeletNode and FreezeNode.
	ExtraNodes []NodeOptions
	// HostLockWait bounds the wait for another kubelet-mode environment on
	// the host, of this or any other process, to end (zero: one hour, as
	// long as the storage e2e suites hold it). One runs at a time, as
	// kubelet's host directories and iptables chains are shared. The
	// package reads no environment variable for it: a test that must give
	// up sooner sets it (its go test -timeout bounds the wait anyway).
	HostLockWait time.Duration
	// CheckLeftovers, when set, fails the test, after the environment's
	// Cleanup, with whatever Leftovers still reports: what the kubelet
	// mode (or the driver's pods, e.g. a mount below the environment's
	// directory) left on the host. Also when Start itself failed halfway.
	CheckLeftovers bool
}

func (k *KubeletOptions) defaults() {
	if k.CNIBinDir == "" {
		k.CNIBinDir = "/usr/lib/cni"
	}
	if k.Busybox == "" {
		k.Busybox = "/bin/busybox"
	}
	if k.ReadyTimeout <= 0 {
		k.ReadyTimeout = 3 * time.Minute
	}
	if k.HostLockWait <= 0 {
		k.HostLockWait = time.Hour
	}
}

// KubeletDir is the kubelet's --root-dir in the kubelet mode (empty
// otherwise): pods' volumes are published below <KubeletDir>/pods.
func (e *Env) KubeletDir() string {
	if e.node == nil {
		return ""
	}
	return e.node.root
}

// PodLogDir is kubelet's podLogsDir in the kubelet mode (empty
// otherwise): <PodLogDir>/<namespace>_<pod>_<uid>/<container>/<n>.log.
func (e *Env) PodLogDir() string {
	if e.node == nil {
		return ""
	}
	return filepath.Join(e.node.dir, "pod-logs")
}

// RegistrationDir is the kubelet's plugin registration directory in the
// kubelet mode (empty otherwise): a node plugin registers by creating
// <RegistrationDir>/<driver>-reg.sock (e.g. examples/hostpath with
// --kubelet-registration-dir).
func (e *Env) RegistrationDir() string {
	if e.node == nil {
		return ""
	}
	return filepath.Join(e.node.root, "plugins_registry")
}

// ContainerdAddress is the socket of the kubelet mode's containerd (empty
// otherwise), e.g. for `ctr --address`.
func (e *Env) ContainerdAddress() string {
	if e.node == nil {
		return ""
	}
	return e.node.sock
}
