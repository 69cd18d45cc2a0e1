package kube

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/csikit/csikit/internal/mountpoint"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// node is the kubelet mode's host side: what it started and what it
// created, so that stop removes exactly that.
type node struct {
	opts    KubeletOptions
	dir     string // <Env.Dir>/node
	root    string // kubelet --root-dir
	sock    string // containerd's gRPC socket
	rtBin   string // containerd, shim, ctr
	id      string // random suffix of the cgroup root, bridge and network
	bridge  string
	cgroups []string // cgroup root directories created, one per hierarchy
	// host state before start, restored or removed by stop
	createdDirs []string // host directories that did not exist (deepest last)
	ipForward   string   // /proc/sys/net/ipv4/ip_forward before start
	chains      []iptChain
	// apiChain is the nat chain sending the kubernetes Service's
	// ClusterIP to the API server on loopback, jumped to from PREROUTING
	// by the rule apiJump (empty until made).
	apiChain string
	apiJump  []string
	// hostLock is held from start to the end of stop (acquireHostLock).
	hostLock *net.UnixConn
	// stopped is set by stop, which lists in sharedLeft what it left in
	// the host state every kubelet-mode environment uses (iptables chains
	// of fixed names, host directories) while it still holds hostLock:
	// once it is released, another environment may create the same.
	stopped    bool
	sharedLeft []string
	containerd *Process
	kubelet    *Process
	scheduler  *Process
	// name is the Node's name; images the tarballs imported into
	// containerd (an extra node imports the same); extra are the nodes of
	// KubeletOptions.ExtraNodes (on the first node only), stopped before
	// it.
	name   string
	images []string
	extra  []*node
}

// iptChain is an iptables chain kubelet creates: removed on stop unless it
// existed before.
type iptChain struct {
	cmd, table, chain string
	jumps             []string // built-in chains jumping to it
}

func kubeletChains() []iptChain {
	var cs []iptChain
	for _, cmd := range []string{"iptables", "ip6tables"} {
		cs = append(cs,
			iptChain{cmd: cmd, table: "filter", chain: "KUBE-FIREWALL", jumps: []string{"INPUT", "OUTPUT"}},
			iptChain{cmd: cmd, table: "mangle", chain: "KUBE-KUBELET-CANARY"},
			iptChain{cmd: cmd, table: "nat", chain: "KUBE-KUBELET-CANARY"},
			iptChain{cmd: cmd, table: "filter", chain: "KUBE-KUBELET-CANARY"},
			iptChain{cmd: cmd, table: "mangle", chain: "KUBE-IPTABLES-HINT"},
		)
	}
	return cs
}

// nodePrereqs returns why the kubelet mode cannot run here, or nil.
func nodePrereqs(k *KubeletOptions) error {
	if os.Geteuid() != 0 {
		return errors.New("kube: the kubelet mode needs root (mounts, cgroups, network namespaces)")
	}
	if k.Runc == "" {
		p, err := exec.LookPath("runc")
		if err != nil {
			return errors.New("kube: the kubelet mode needs runc (Debian: apt-get install runc)")
		}
		k.Runc = p
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(k.CNIBinDir, p)); err != nil {
			return fmt.Errorf("kube: the kubelet mode needs the CNI plugin %s in %s (Debian: apt-get install containernetworking-plugins)", p, k.CNIBinDir)
		}
	}
	if _, err := os.Stat(k.Busybox); err != nil {
		return fmt.Errorf("kube: the kubelet mode needs a static busybox at %s (Debian: apt-get install busybox-static)", k.Busybox)
	}
	for _, c := range []string{"iptables", "ip"} {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("kube: the kubelet mode needs %s (Debian: apt-get install iptables iproute2)", c)
		}
	}
	return nil
}

// NodePrereqs reports why the kubelet mode cannot run on this host (not
// root, runc, CNI plugins, busybox or iptables missing), or nil: tests skip
// on it.
func NodePrereqs(k KubeletOptions) error {
	k.defaults()
	return nodePrereqs(&k)
}

func randomID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("kube: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// newNode returns the node named name whose state is below dir: its
// kubelet root, containerd socket, and the bridge named after id.
func newNode(k KubeletOptions, dir, name, id string) *node {
	return &node{opts: k, dir: dir, id: id, bridge: "csikit" + id, name: name,
		root: filepath.Join(dir, "kubelet"), sock: filepath.Join(dir, "containerd.sock")}
}

// startNode brings up containerd, kubelet and kube-scheduler and waits
// for the Node to be Ready. e.node is set first, so that e.stop cleans up
// whatever part was started.
func (e *Env) startNode(t testing.TB, ctx context.Context) error {
	k := *e.Opts.Kubelet
	k.defaults()
	if err := nodePrereqs(&k); err != nil {
		return err
	}
	id, err := randomID()
	if err != nil {
		return err
	}
	if err := checkExtraNodes(e.Opts.NodeName, k.ExtraNodes); err != nil {
		return err
	}
	n := newNode(k, filepath.Join(e.Dir, "node"), e.Opts.NodeName, id)
	e.node = n
	// Before looking at the host's state: another environment's would be
	// taken for what existed before this one.
	if n.hostLock, err = acquireHostLock(ctx, hostLockName, k.HostLockWait, t.Logf); err != nil {
		return err
	}
	if k.RuntimeBinDir == "" {
		// A cold build takes minutes: not bounded by the start timeout.
		d, err := EnsureRuntimeBinaries(context.Background(), BuildOptions{})
		if err != nil {
			return err
		}
		k.RuntimeBinDir = d
		n.opts.RuntimeBinDir = d
	} else if m := MissingRuntimeBinaries(k.RuntimeBinDir); len(m) > 0 {
		return fmt.Errorf("kube: KubeletOptions.RuntimeBinDir %s lacks %v", k.RuntimeBinDir, m)
	}
	n.rtBin = k.RuntimeBinDir
	for _, d := range []string{n.dir, n.root, filepath.Join(n.dir, "cni", "net.d"), filepath.Join(n.dir, "images"), filepath.Join(n.dir, "pod-logs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("kube: %w", err)
		}
	}
	// Host state kubelet or the CNI plugins change outside n.dir.
	for _, d := range []string{"/var/log/containers", "/var/lib/cni"} {
		if _, err := os.Lstat(d); errors.Is(err, os.ErrNotExist) {
			n.createdDirs = append(n.createdDirs, d)
		}
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err == nil {
		n.ipForward = strings.TrimSpace(string(b))
	}
	for _, c := range kubeletChains() {
		if !chainExists(c) {
			n.chains = append(n.chains, c)
		}
	}
	t0 := time.Now()
	images, err := n.buildImages(ctx)
	if err != nil {
		return err
	}
	t1 := time.Now()
	svc, err := e.apiService(ctx)
	if err != nil {
		return err
	}
	n.images = append(images, k.Images...)
	rctx, cancel := context.WithTimeout(ctx, k.ReadyTimeout)
	defer cancel()
	if err := e.startRuntime(rctx, n, BinContainerd, "", svc); err != nil {
		return err
	}
	t2 := time.Now()
	if err := e.startKubelet(n, BinKubelet, e.Opts.NodeTopology); err != nil {
		return err
	}
	sport, err := freePort()
	if err != nil {
		return err
	}
	if n.scheduler, err = e.run(BinScheduler, []string{
		"--kubeconfig=" + e.Kubeconfig,
		"--authentication-kubeconfig=" + e.Kubeconfig,
		"--authorization-kubeconfig=" + e.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(sport),
		"--leader-elect=false", "--v=2",
	}, true); err != nil {
		return err
	}
	if err := e.waitNodeReady(rctx, n.name, k.ReadyTimeout); err != nil {
		return err
	}
	t.Logf("kube: kubelet mode: images built in %s, containerd ready and images imported in %s, Node ready in %s",
		t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), time.Since(t2).Round(time.Millisecond))
	for _, x := range k.ExtraNodes {
		if err := e.startExtraNode(t, ctx, x, svc); err != nil {
			return err
		}
	}
	return nil
}

// apiService returns the kubernetes Service, once the API server has made
// it.
func (e *Env) apiService(ctx context.Context) (*corev1.Service, error) {
	var svc *corev1.Service
	if err := Poll(ctx, e.node.opts.ReadyTimeout, func(ctx context.Context) (bool, string, error) {
		s, err := e.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return false, "no kubernetes Service yet", nil
		}
		svc = s
		return s.Spec.ClusterIP != "" && len(s.Spec.Ports) > 0, "", nil
	}); err != nil {
		return nil, fmt.Errorf("kube: the kubernetes Service: %w", err)
	}
	return svc, nil
}

// startRuntime brings up node n's container runtime, the part of a
// node's start that every node repeats (the first one and each of
// ExtraNodes): a free pod subnet, containerd's and the CNI config, its
// containerd (process name procName) until it answers, n.images imported
// into it, and the route from its bridge to the API server (svc). ctx
// bounds the waits (the node's ReadyTimeout); what names the node in
// errors ("" for the first node, "node <name>: " for an extra one).
func (e *Env) startRuntime(ctx context.Context, n *node, procName, what string, svc *corev1.Service) error {
	subnet, err := freeSubnet()
	if err != nil {
		return err
	}
	if err := n.writeRuntimeConfig(subnet, svc.Spec.ClusterIP); err != nil {
		return err
	}
	if n.containerd, err = e.runPath(procName, filepath.Join(n.rtBin, BinContainerd),
		[]string{"--config=" + filepath.Join(n.dir, "containerd.toml")}, true,
		[]string{"PATH=" + n.rtBin + ":/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + n.dir}); err != nil {
		return err
	}
	if err := Poll(ctx, n.opts.ReadyTimeout, func(ctx context.Context) (bool, string, error) {
		if !n.containerd.Running() {
			return false, "containerd exited (log: " + n.containerd.LogPath + ")", nil
		}
		out, err := n.ctr(ctx, "version")
		return err == nil, out, nil
	}); err != nil {
		return fmt.Errorf("kube: %scontainerd not ready: %w", what, err)
	}
	for _, img := range n.images {
		if out, err := n.ctr(ctx, "--namespace=k8s.io", "images", "import", "--local", "--snapshotter=native", img); err != nil {
			return fmt.Errorf("kube: %simport %s into containerd: %v: %s", what, img, err, out)
		}
	}
	return e.routeAPIService(n, svc)
}

// startKubelet starts node n's kubelet (process name procName) for the
// Node n.name with labels: its cgroup root, a free port for its API on
// n.opts.NodeIP (default loopback) and its config, all below n.dir. It
// does not wait for the Node (waitNodeReady).
func (e *Env) startKubelet(n *node, procName string, labels map[string]string) error {
	if err := n.makeCgroups(); err != nil {
		return err
	}
	kport, err := freePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1"
	if n.opts.NodeIP != "" {
		addr = n.opts.NodeIP
	}
	if err := n.writeKubeletConfig(addr, kport); err != nil {
		return err
	}
	var ls []string
	for _, key := range slices.Sorted(maps.Keys(labels)) {
		ls = append(ls, key+"="+labels[key])
	}
	kargs := []string{
		"--config=" + filepath.Join(n.dir, "kubelet.yaml"),
		"--kubeconfig=" + e.Kubeconfig,
		"--root-dir=" + n.root,
		"--hostname-override=" + n.name,
		"--v=2",
	}
	if len(ls) > 0 {
		kargs = append(kargs, "--node-labels="+strings.Join(ls, ","))
	}
	if n.opts.NodeIP != "" {
		kargs = append(kargs, "--node-ip="+n.opts.NodeIP)
	}
	n.kubelet, err = e.runPath(procName, filepath.Join(e.Opts.BinDir, BinKubelet), kargs, true, nil)
	return err
}

// routeAPIService lets pods reach the API server the way in-cluster
// clients do, through the kubernetes Service svc (KUBERNETES_SERVICE_HOST
// is its ClusterIP, which the CNI config routes to the bridge): the pod
// bridge is made here, before the CNI plugin would, with route_localnet
// on (only for this bridge, gone with it), and a nat chain of this node
// DNATs exactly the Service's ClusterIP and port, arriving on this
// bridge, to the API server on 127.0.0.1. There is no kube-proxy: the API
// server listens on loopback only, and an Endpoints or EndpointSlice
// address may not be a loopback address. kubelet's KUBE-FIREWALL drops
// other traffic from pods to 127.0.0.0/8 (it accepts DNATed connections
// only).
func (e *Env) routeAPIService(n *node, svc *corev1.Service) error {
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		return fmt.Errorf("kube: API server address %q: %w", e.Config.Host, err)
	}
	if out, err := exec.Command("ip", "link", "add", "name", n.bridge, "type", "bridge").CombinedOutput(); err != nil {
		return fmt.Errorf("kube: ip link add %s: %v: %s", n.bridge, err, out)
	}
	if err := os.WriteFile(filepath.Join("/proc/sys/net/ipv4/conf", n.bridge, "route_localnet"), []byte("1"), 0o644); err != nil {
		return fmt.Errorf("kube: route_localnet on %s: %w", n.bridge, err)
	}
	chain := "CSIKIT-API-" + n.id
	ipt := func(args ...string) error {
		if out, err := exec.Command("iptables", append([]string{"-w", "5", "-t", "nat"}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("kube: iptables -t nat %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := ipt("-N", chain); err != nil {
		return err
	}
	n.apiChain = chain
	if err := ipt("-A", chain, "-p", "tcp", "-m", "comment", "--comment", "csikit sanity/kube: kubernetes Service to the API server",
		"-j", "DNAT", "--to-destination", "127.0.0.1:"+u.Port()); err != nil {
		return err
	}
	jump := []string{"PREROUTING", "-i", n.bridge, "-d", svc.Spec.ClusterIP + "/32", "-p", "tcp",
		"--dport", strconv.Itoa(int(svc.Spec.Ports[0].Port)), "-j", chain}
	if err := ipt(append([]string{"-A"}, jump...)...); err != nil {
		return err
	}
	n.apiJump = jump
	return nil
}

// removeAPIRoute deletes the jump to this node's nat chain and the chain.
func (n *node) removeAPIRoute() []error {
	if n.apiChain == "" {
		return nil
	}
	var errs []error
	if n.apiJump != nil {
		args := append([]string{"-w", "5", "-t", "nat", "-D"}, n.apiJump...)
		if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube: iptables %s: %v: %s", strings.Join(args, " "), err, out))
		}
	}
	for _, op := range []string{"-F", "-X"} {
		if out, err := exec.Command("iptables", "-w", "5", "-t", "nat", op, n.apiChain).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube: iptables -t nat %s %s: %v: %s", op, n.apiChain, err, out))
		}
	}
	return errs
}

// ctr runs ctr against this node's containerd.
func (n *node) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(n.rtBin, BinCtr), append([]string{"--address=" + n.sock}, args...)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// buildImages writes the pause and busybox image tarballs and returns
// their paths. pause is built static by the go command.
func (n *node) buildImages(ctx context.Context) ([]string, error) {
	mod, err := ModuleDir()
	if err != nil {
		return nil, err
	}
	imgDir := filepath.Join(n.dir, "images")
	pause := filepath.Join(imgDir, "pause")
	if err := BuildStatic(ctx, mod, "./internal/pause", pause); err != nil {
		return nil, err
	}
	pauseTar := filepath.Join(imgDir, "pause.tar")
	if err := WriteImage(pauseTar, PauseImage, ImageConfig{Entrypoint: []string{"/pause"}},
		[]ImageFile{{Path: "/pause", Source: pause}}); err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, n.opts.Busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("kube: %s --list: %w", n.opts.Busybox, err)
	}
	files, err := BusyboxFiles(n.opts.Busybox, strings.Fields(string(out)))
	if err != nil {
		return nil, err
	}
	bbTar := filepath.Join(imgDir, "busybox.tar")
	if err := WriteImage(bbTar, BusyboxImage, ImageConfig{Cmd: []string{"sh"}}, files); err != nil {
		return nil, err
	}
	return []string{pauseTar, bbTar}, nil
}

// BuildStatic builds the Go package pkg (relative to dir, e.g. "./cmd/x")
// into out as a static binary (CGO_ENABLED=0), for an image layer.
func BuildStatic(ctx context.Context, dir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kube: go build %s: %w: %s", pkg, err, lastLines(b, 20))
	}
	return nil
}

// freeSubnet returns a 10.x.y.0/24 no route of this host covers.
func freeSubnet() (string, error) {
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return "", fmt.Errorf("kube: ip route: %w", err)
	}
	routes := string(out)
	for i := 0; i < 64; i++ {
		var b [1]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("kube: %w", err)
		}
		prefix := fmt.Sprintf("10.%d.%d.", 200+int(b[0])%50, b[0])
		if !strings.Contains(routes, prefix) && !strings.Contains(routes, "10.0.0.0/8") {
			return prefix + "0/24", nil
		}
	}
	return "", errors.New("kube: no free 10.x.y.0/24 for the pod network")
}

// writeRuntimeConfig writes containerd's config and the CNI network: a
// bridge with host-local addresses, nothing NATed (pods need no outside
// network), and a route to the kubernetes Service's ClusterIP apiIP
// through the bridge (see routeAPIService) and, with KubeletOptions.NodeIP,
// one to that address (the host answers it: a backend a test runs on the
// host, reached as pods of a cluster reach their node). Every path containerd and runc
// use is below n.dir.
func (n *node) writeRuntimeConfig(subnet, apiIP string) error {
	routes := fmt.Sprintf(`{"dst": %q}`, apiIP+"/32")
	if n.opts.NodeIP != "" {
		routes += fmt.Sprintf(`, {"dst": %q}`, n.opts.NodeIP+"/32")
	}
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "csikit-%s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [%s], "dataDir": %q}
    },
    {"type": "loopback"}
  ]
}
`, n.id, n.bridge, subnet, routes, filepath.Join(n.dir, "cni", "ipam"))
	if err := os.WriteFile(filepath.Join(n.dir, "cni", "net.d", "10-csikit.conflist"), []byte(cni), 0o600); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	q := strconv.Quote
	cfg := `version = 3
root = ` + q(filepath.Join(n.dir, "containerd", "root")) + `
state = ` + q(filepath.Join(n.dir, "containerd", "state")) + `
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.nri.v1.nri"]

[grpc]
  address = ` + q(n.sock) + `

[ttrpc]
  address = ` + q(n.sock+".ttrpc") + `

[plugins."io.containerd.shim.v1.manager"]
  socket_dir = ` + q(filepath.Join(n.dir, "s")) + `

[plugins."io.containerd.cri.v1.runtime"]
  # The sandbox lacks CAP_SYS_RESOURCE: never lower a container's OOM score below containerd's.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      snapshotter = "native"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = ` + q(n.opts.Runc) + `
        Root = ` + q(filepath.Join(n.dir, "runc")) + `
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [` + q(n.opts.CNIBinDir) + `]
    conf_dir = ` + q(filepath.Join(n.dir, "cni", "net.d")) + `

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "native"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = ` + q(PauseImage) + `

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`
	if err := os.WriteFile(filepath.Join(n.dir, "containerd.toml"), []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	return nil
}

// writeKubeletConfig writes the KubeletConfiguration: cgroupfs below this
// node's own cgroup root, cgroup v1 and swap tolerated, its API on
// loopback with anonymous AlwaysAllow auth, no eviction or image GC (the
// machine is shared), everything below n.dir.
func (n *node) writeKubeletConfig(addr string, port int) error {
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupRoot: %s
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
volumePluginDir: %s
registerNode: true
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
fileCheckFrequency: 5s
`, addr, port, "/"+n.cgroupName(), n.sock, filepath.Join(n.dir, "pod-logs"), filepath.Join(n.dir, "volume-plugins"))
	if err := os.WriteFile(filepath.Join(n.dir, "kubelet.yaml"), []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	return nil
}

func (n *node) cgroupName() string { return "csikit-kube-" + n.id }

// cgroupHierarchies returns the mount points of the cgroup hierarchies
// (each v1 controller, or the v2 unified tree).
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		i := slices.Index(fields, "-")
		if i < 0 || i+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		if fs := fields[i+1]; fs == "cgroup" || fs == "cgroup2" {
			out = append(out, mountpoint.UnescapeOctal(fields[4]))
		}
	}
	return out, sc.Err()
}

// makeCgroups creates this node's cgroup root in every hierarchy: kubelet
// creates kubepods below it, and stop removes the whole subtree.
func (n *node) makeCgroups() error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	if len(hs) == 0 {
		return errors.New("kube: no cgroup hierarchy mounted")
	}
	for _, h := range hs {
		d := filepath.Join(h, n.cgroupName())
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("kube: cgroup root: %w", err)
		}
		n.cgroups = append(n.cgroups, d)
		if filepath.Base(h) == "cpuset" {
			// A v1 cpuset cgroup starts empty; runc copies from the parent
			// only for the cgroups it creates.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(h, f))
				if err == nil {
					err = os.WriteFile(filepath.Join(d, f), b, 0o644)
				}
				if err != nil {
					return fmt.Errorf("kube: cgroup root: %w", err)
				}
			}
		}
	}
	return nil
}

// chainExists reports whether an iptables chain exists.
func chainExists(c iptChain) bool {
	if _, err := exec.LookPath(c.cmd); err != nil {
		return true // nothing to clean up with a missing tool
	}
	return exec.Command(c.cmd, "-w", "5", "-t", c.table, "-S", c.chain).Run() == nil
}

// stopNode tears the node down, collecting every failure: pods' sandboxes
// (network namespaces, CNI) through CRI, kubelet, scheduler, containerd,
// leftover shims of this containerd (by PID), mounts below Env.Dir,
// cgroups, iptables chains kubelet created, the bridge, host directories
// created, and ip_forward.
func (e *Env) stopNode() []error {
	n := e.node
	var errs []error
	if n.kubelet != nil && n.containerd != nil && n.containerd.Running() && e.Client != nil {
		// Let kubelet unmount volumes (the driver may still run).
		if err := e.DeletePods(context.Background(), 60*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	// The extra nodes' pods are gone: stop their kubelets and runtimes
	// while this node's host state (iptables chains) still exists.
	for _, x := range n.extra {
		errs = append(errs, x.stopExtra()...)
	}
	for _, p := range []*Process{n.scheduler, n.kubelet} {
		if p != nil {
			if err := p.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, n.stopRuntime(e.Dir)...)
	for _, c := range n.chains {
		if chainExists(c) {
			for _, j := range c.jumps {
				for exec.Command(c.cmd, "-w", "5", "-t", c.table, "-D", j, "-j", c.chain).Run() == nil {
				}
			}
			for _, op := range []string{"-F", "-X"} {
				if out, err := exec.Command(c.cmd, "-w", "5", "-t", c.table, op, c.chain).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("kube: %s -t %s %s %s: %v: %s", c.cmd, c.table, op, c.chain, err, out))
				}
			}
		}
	}
	errs = append(errs, n.removeBridge()...)
	errs = append(errs, n.removeHostLeftovers()...)
	for i := len(n.createdDirs) - 1; i >= 0; i-- {
		errs = append(errs, removeEmptyTree(n.createdDirs[i])...)
	}
	if n.ipForward != "" {
		if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); err == nil && strings.TrimSpace(string(b)) != n.ipForward {
			if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(n.ipForward), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("kube: restore ip_forward: %w", err))
			}
		}
	}
	// Checked now: once the lock is released, another environment's
	// chains and directories of the same names would be taken for ours.
	n.sharedLeft, n.stopped = n.sharedLeftovers(), true
	if n.hostLock != nil {
		n.hostLock.Close()
	}
	return errs
}

// Leftovers lists what the kubelet mode created on the host and has not
// removed: after Cleanup it must be empty. It reports the environment's
// directory and mounts below it, this node's cgroups, bridge, shims and
// the iptables chains and host directories it created. Those last two
// have names every kubelet-mode environment shares: after Cleanup they
// are as the environment's own cleanup found them before it released the
// host lock, so that another environment started since cannot be taken
// for a leak of this one.
func (e *Env) Leftovers() []string {
	var out []string
	if _, err := os.Lstat(e.Dir); err == nil {
		out = append(out, "directory "+e.Dir)
	}
	if mps, _ := mountsBelow(e.Dir); len(mps) > 0 {
		out = append(out, fmt.Sprintf("mounts %v", mps))
	}
	for dev, file := range loopsBelow(e.Dir) {
		out = append(out, fmt.Sprintf("loop device %s (%s)", dev, file))
	}
	n := e.node
	if n == nil {
		return out
	}
	for _, c := range n.cgroups {
		if _, err := os.Stat(c); err == nil {
			out = append(out, "cgroup "+c)
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.bridge)); err == nil {
		out = append(out, "bridge "+n.bridge)
	}
	if pids := n.shimPIDs(); len(pids) > 0 {
		out = append(out, fmt.Sprintf("shim PIDs %v", pids))
	}
	for _, x := range n.extra {
		out = append(out, x.leftovers()...)
	}
	if n.apiChain != "" && chainExists(iptChain{cmd: "iptables", table: "nat", chain: n.apiChain}) {
		out = append(out, "iptables chain nat/"+n.apiChain)
	}
	if n.stopped {
		return append(out, n.sharedLeft...)
	}
	return append(out, n.sharedLeftovers()...)
}

// sharedLeftovers lists what this node created in host state of fixed
// names that every kubelet-mode environment uses (kubelet's iptables
// chains, /var/log/containers, /var/lib/cni) and that is still there:
// meaningful only while the host lock is held.
func (n *node) sharedLeftovers() []string {
	var out []string
	for _, c := range n.chains {
		if chainExists(c) {
			out = append(out, fmt.Sprintf("%s chain %s/%s", c.cmd, c.table, c.chain))
		}
	}
	for _, d := range n.createdDirs {
		if _, err := os.Lstat(d); err == nil {
			out = append(out, "directory "+d)
		}
	}
	return out
}

// DeletePods deletes every workload in every namespace in two rounds and
// waits (up to timeout in all) until the pods are gone, which in the
// kubelet mode means kubelet has stopped their containers and unpublished
// their volumes. The first round takes the consumers of volumes: each Pod
// with a PersistentVolumeClaim, an inline CSI volume or a generic
// ephemeral volume, and each DaemonSet, Deployment, ReplicaSet and
// StatefulSet whose pod template has one (so that none recreates its
// pods). Only when those pods are gone does the second round delete the
// rest, the driver's own pods among them: a driver deployed as pods must
// outlive the pods whose volumes it unpublishes, or kubelet's unmount
// fails and the pods never go. Call it while the driver still runs, e.g.
// in a Cleanup registered after the driver's.
//
// Each round deletes again, about once a second, what it selects and is
// still there: a controller whose cache lags behind the deletion of its
// owner (the deployment controller, on a loaded machine) can recreate a
// ReplicaSet, and with it a pod, after the round's first pass. Only the
// garbage collector would delete those, and CI saw it leave one for the
// whole timeout.
func (e *Env) DeletePods(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := e.deleteUntilGone(ctx, timeout, usesVolumes, "pods with volumes"); err != nil {
		return err
	}
	return e.deleteUntilGone(ctx, timeout, func(corev1.PodSpec) bool { return true }, "pods")
}

// redeleteEvery is how often deleteUntilGone deletes again what is left.
const redeleteEvery = time.Second

// deleteUntilGone deletes the workloads and pods that match selects
// (deleteWorkloads) until none of those pods is left, again every
// redeleteEvery while some are.
func (e *Env) deleteUntilGone(ctx context.Context, timeout time.Duration, match func(corev1.PodSpec) bool, what string) error {
	if err := e.deleteWorkloads(ctx, match); err != nil {
		return err
	}
	last := time.Now()
	err := Poll(ctx, timeout, func(ctx context.Context) (bool, string, error) {
		left, err := e.podsLeft(ctx, match)
		if err != nil || len(left) == 0 {
			return err == nil, "", err
		}
		if time.Since(last) >= redeleteEvery {
			last = time.Now()
			if err := e.deleteWorkloads(ctx, match); err != nil {
				return false, fmt.Sprintf("%s left: %v", what, left), err
			}
		}
		return false, fmt.Sprintf("%s left: %v", what, left), nil
	})
	if err != nil {
		return fmt.Errorf("kube: %s not deleted: %w", what, err)
	}
	return nil
}

// usesVolumes reports whether a pod of this spec has a volume that a CSI
// driver may serve.
func usesVolumes(spec corev1.PodSpec) bool {
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.CSI != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}

// workload is a controller of pods and how to delete it.
type workload struct {
	kind, ns, name string
	spec           corev1.PodSpec
	del            func(context.Context) error
}

// controllers lists every DaemonSet, Deployment, StatefulSet and
// ReplicaSet, owners before what they own (a Deployment would remake its
// ReplicaSet).
func (e *Env) controllers(ctx context.Context) ([]workload, error) {
	apps, opts, none := e.Client.AppsV1(), metav1.ListOptions{}, metav1.DeleteOptions{}
	var out []workload
	ds, err := apps.DaemonSets("").List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kube: list DaemonSets: %w", err)
	}
	for _, x := range ds.Items {
		out = append(out, workload{"DaemonSet", x.Namespace, x.Name, x.Spec.Template.Spec,
			func(ctx context.Context) error { return apps.DaemonSets(x.Namespace).Delete(ctx, x.Name, none) }})
	}
	deps, err := apps.Deployments("").List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kube: list Deployments: %w", err)
	}
	for _, x := range deps.Items {
		out = append(out, workload{"Deployment", x.Namespace, x.Name, x.Spec.Template.Spec,
			func(ctx context.Context) error { return apps.Deployments(x.Namespace).Delete(ctx, x.Name, none) }})
	}
	sts, err := apps.StatefulSets("").List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kube: list StatefulSets: %w", err)
	}
	for _, x := range sts.Items {
		// Its pods get the claims of its volumeClaimTemplates, which the
		// template's own volumes do not list.
		spec := x.Spec.Template.Spec
		spec.Volumes = slices.Clone(spec.Volumes)
		for _, c := range x.Spec.VolumeClaimTemplates {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name}}})
		}
		out = append(out, workload{"StatefulSet", x.Namespace, x.Name, spec,
			func(ctx context.Context) error { return apps.StatefulSets(x.Namespace).Delete(ctx, x.Name, none) }})
	}
	rss, err := apps.ReplicaSets("").List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kube: list ReplicaSets: %w", err)
	}
	for _, x := range rss.Items {
		out = append(out, workload{"ReplicaSet", x.Namespace, x.Name, x.Spec.Template.Spec,
			func(ctx context.Context) error { return apps.ReplicaSets(x.Namespace).Delete(ctx, x.Name, none) }})
	}
	return out, nil
}

// deleteWorkloads deletes, in every namespace, the controllers whose pod
// template match selects and then the pods it selects (grace period 1s).
func (e *Env) deleteWorkloads(ctx context.Context, match func(corev1.PodSpec) bool) error {
	ws, err := e.controllers(ctx)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if !match(w.spec) {
			continue
		}
		if err := w.del(ctx); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kube: delete %s %s/%s: %w", w.kind, w.ns, w.name, err)
		}
	}
	pods, err := e.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("kube: list pods: %w", err)
	}
	grace := int64(1)
	for _, p := range pods.Items {
		if !match(p.Spec) {
			continue
		}
		if err := e.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name,
			metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kube: delete pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// podsLeft lists (namespace/name) the pods that match selects.
func (e *Env) podsLeft(ctx context.Context, match func(corev1.PodSpec) bool) ([]string, error) {
	pods, err := e.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: list pods: %w", err)
	}
	var left []string
	for _, p := range pods.Items {
		if match(p.Spec) {
			left = append(left, p.Namespace+"/"+p.Name)
		}
	}
	return left, nil
}

// removeSandboxes stops and removes every pod sandbox through CRI, which
// tears down its containers, network namespace and CNI attachment.
func (n *node) removeSandboxes() []error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+n.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return []error{fmt.Errorf("kube: CRI: %w", err)}
	}
	defer conn.Close()
	rs := cri.NewRuntimeServiceClient(conn)
	resp, err := rs.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		return []error{fmt.Errorf("kube: CRI ListPodSandbox: %w", err)}
	}
	var errs []error
	for _, sb := range resp.GetItems() {
		if _, err := rs.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: sb.GetId()}); err != nil {
			errs = append(errs, fmt.Errorf("kube: CRI StopPodSandbox %s: %w", sb.GetId(), err))
		}
		if _, err := rs.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: sb.GetId()}); err != nil {
			errs = append(errs, fmt.Errorf("kube: CRI RemovePodSandbox %s: %w", sb.GetId(), err))
		}
	}
	return errs
}

// killShims SIGKILLs shims still serving this containerd: the shims
// daemonize, so they are found by PID in /proc, matched on the exact
// address of this node's containerd in their command line.
func (n *node) killShims() []error {
	var errs []error
	for _, pid := range n.shimPIDs() {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kube: kill shim %d: %w", pid, err))
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(n.shimPIDs()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := n.shimPIDs(); len(left) > 0 {
		errs = append(errs, fmt.Errorf("kube: shims %v survived SIGKILL", left))
	}
	return errs
}

func (n *node) shimPIDs() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	shim := filepath.Join(n.rtBin, BinShim)
	var pids []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 0 || args[0] != shim {
			continue
		}
		if i := slices.Index(args, "-address"); i >= 0 && i+1 < len(args) && args[i+1] == n.sock {
			pids = append(pids, pid)
		}
	}
	return pids
}

// removeCgroups removes this node's cgroup subtrees, deepest first,
// SIGKILLing any process still in them (only processes this node started
// can be there).
func (n *node) removeCgroups() []error {
	var errs []error
	for _, root := range n.cgroups {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			d := dirs[i]
			var err error
			for try := 0; try < 50; try++ {
				if b, rerr := os.ReadFile(filepath.Join(d, "cgroup.procs")); rerr == nil {
					for _, f := range strings.Fields(string(b)) {
						if pid, perr := strconv.Atoi(f); perr == nil && pid > 1 {
							_ = syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("kube: remove cgroup %s: %w", d, err))
			}
		}
	}
	return errs
}

// unmountBelow unmounts every mount point below dir (deepest first), so
// that removing dir never reaches into a mounted volume.
func unmountBelow(dir string) []error {
	var errs []error
	for try := 0; try < 3; try++ {
		mps, err := mountsBelow(dir)
		if err != nil {
			return []error{err}
		}
		if len(mps) == 0 {
			return nil
		}
		errs = nil
		for _, mp := range mps {
			if err := syscall.Unmount(mp, 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				if err2 := syscall.Unmount(mp, syscall.MNT_DETACH); err2 != nil && !errors.Is(err2, syscall.EINVAL) {
					errs = append(errs, fmt.Errorf("kube: unmount %s: %w", mp, err))
				}
			}
		}
	}
	if mps, err := mountsBelow(dir); err == nil && len(mps) > 0 {
		errs = append(errs, fmt.Errorf("kube: still mounted below %s: %v", dir, mps))
	}
	return errs
}

// loopsBelow maps each loop device whose backing file is below dir (also
// one deleted since it was attached) to that file.
func loopsBelow(dir string) map[string]string {
	out := map[string]string{}
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // detached meanwhile
		}
		file := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
		if strings.HasPrefix(file, dir+"/") {
			out["/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f)))] = file
		}
	}
	return out
}

// detachLoopsBelow detaches the loop devices backed by files below dir,
// which kubelet stopped with volumes still staged, or a driver that does
// not detach on NodeUnstageVolume, leaves behind. Each is an error: the
// environment cleaned up after a failure or a leak.
func detachLoopsBelow(dir string) []error {
	var errs []error
	for dev, file := range loopsBelow(dir) {
		out, err := exec.Command("losetup", "-d", dev).CombinedOutput()
		if err != nil {
			errs = append(errs, fmt.Errorf("kube: loop device %s (backing file %s) left attached; losetup -d: %v: %s", dev, file, err, out))
			continue
		}
		errs = append(errs, fmt.Errorf("kube: loop device %s (backing file %s) was left attached; detached it", dev, file))
	}
	return errs
}

// mountsBelow lists mount points at or below dir, deepest first.
func mountsBelow(dir string) ([]string, error) {
	mps, err := mountpoint.Under(dir)
	if err != nil {
		return nil, fmt.Errorf("kube: mountinfo: %w", err)
	}
	return mps, nil
}

// removeHostLeftovers removes what this node left in host directories
// shared with others, by exact name: kubelet's symlinks in
// /var/log/containers pointing into this node's pod logs, and libcni's
// cached results of this node's network.
func (n *node) removeHostLeftovers() []error {
	var errs []error
	podLogs := filepath.Join(n.dir, "pod-logs") + "/"
	if ents, err := os.ReadDir("/var/log/containers"); err == nil {
		for _, ent := range ents {
			p := filepath.Join("/var/log/containers", ent.Name())
			if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, podLogs) {
				if err := os.Remove(p); err != nil {
					errs = append(errs, fmt.Errorf("kube: %w", err))
				}
			}
		}
	}
	results := "/var/lib/cni/results"
	if ents, err := os.ReadDir(results); err == nil {
		for _, ent := range ents {
			if strings.HasPrefix(ent.Name(), "csikit-"+n.id+"-") {
				if err := os.Remove(filepath.Join(results, ent.Name())); err != nil {
					errs = append(errs, fmt.Errorf("kube: %w", err))
				}
			}
		}
	}
	return errs
}

// removeEmptyTree removes dir if it holds only empty directories (what
// kubelet or the CNI plugins left); a file in it is reported, not removed.
func removeEmptyTree(dir string) []error {
	var dirs []string
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
		return nil
	})
	if len(files) > 0 {
		return []error{fmt.Errorf("kube: %s (created by this environment) still holds %v", dir, files)}
	}
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("kube: %w", err))
		}
	}
	return errs
}
