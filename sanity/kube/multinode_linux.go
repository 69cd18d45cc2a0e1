package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startExtraNode brings up one more node on this host (ExtraNodes): its
// own containerd, bridge, pod subnet, API route, cgroup root and kubelet,
// everything below <Env.Dir>/node-<name>, and waits until the Node is
// Ready. The first node (e.node) must be up; it owns the host state the
// nodes share (host lock, iptables chains kubelet creates, host
// directories) and stops this node first.
func (e *Env) startExtraNode(t testing.TB, ctx context.Context, o NodeOptions, svc *corev1.Service) error {
	first := e.node
	id, err := randomID()
	if err != nil {
		return err
	}
	n := newNode(first.opts, filepath.Join(e.Dir, "node-"+o.Name), o.Name, id)
	n.rtBin, n.images = first.rtBin, first.images
	n.opts.ExtraNodes = nil
	if o.NodeIP != "" {
		n.opts.NodeIP = o.NodeIP
	}
	first.extra = append(first.extra, n)
	t0 := time.Now()
	for _, d := range []string{n.dir, n.root, filepath.Join(n.dir, "cni", "net.d"), filepath.Join(n.dir, "pod-logs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("kube: %w", err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, n.opts.ReadyTimeout)
	defer cancel()
	if err := e.startRuntime(rctx, n, BinContainerd+"-"+o.Name, "node "+o.Name+": ", svc); err != nil {
		return err
	}
	labels := o.Labels
	if len(labels) == 0 {
		labels = e.Opts.NodeTopology
	}
	if err := e.startKubelet(n, BinKubelet+"-"+o.Name, labels); err != nil {
		return err
	}
	if err := e.waitNodeReady(rctx, o.Name, n.opts.ReadyTimeout); err != nil {
		return err
	}
	t.Logf("kube: kubelet mode: node %s ready in %s", o.Name, time.Since(t0).Round(time.Millisecond))
	return nil
}

// waitNodeReady waits until the Node is Ready without a NoSchedule taint.
func (e *Env) waitNodeReady(ctx context.Context, name string, timeout time.Duration) error {
	if err := Poll(ctx, timeout, func(ctx context.Context) (bool, string, error) {
		nd, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "no Node yet", nil
		}
		for _, c := range nd.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready := c.Status == corev1.ConditionTrue
				for _, taint := range nd.Spec.Taints {
					if taint.Effect == corev1.TaintEffectNoSchedule {
						ready = false
					}
				}
				return ready, fmt.Sprintf("Ready=%s (%s), taints %v", c.Status, c.Message, nd.Spec.Taints), nil
			}
		}
		return false, "no Ready condition", nil
	}); err != nil {
		return fmt.Errorf("kube: Node %s not ready: %w", name, err)
	}
	return nil
}

// stopExtra stops an extra node (its pods already deleted): kubelet, the
// sandboxes through CRI, containerd and its shims, mounts below its
// directory, its cgroups, API route, bridge and CNI results.
func (n *node) stopExtra() []error {
	var errs []error
	if n.kubelet != nil {
		if err := n.kubelet.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, n.stopRuntime(n.dir)...)
	errs = append(errs, n.removeBridge()...)
	errs = append(errs, n.removeHostLeftovers()...)
	return errs
}

// stopRuntime stops the node's containerd (its pods' sandboxes removed
// through CRI first, its leftover shims killed by PID), then unmounts what
// is left below dir and removes the node's cgroups and its route to the
// API server. Its kubelet is stopped already.
func (n *node) stopRuntime(dir string) []error {
	var errs []error
	if n.containerd != nil {
		if n.containerd.Running() {
			errs = append(errs, n.removeSandboxes()...)
		}
		if err := n.containerd.Stop(); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, n.killShims()...)
	}
	errs = append(errs, unmountBelow(dir)...)
	errs = append(errs, detachLoopsBelow(dir)...)
	errs = append(errs, n.removeCgroups()...)
	return append(errs, n.removeAPIRoute()...)
}

// removeBridge deletes the node's bridge, if there is one.
func (n *node) removeBridge() []error {
	var errs []error
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.bridge)); err == nil {
		if out, err := exec.Command("ip", "link", "del", n.bridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube: ip link del %s: %v: %s", n.bridge, err, out))
		}
	}
	return errs
}

// leftovers lists an extra node's host state not removed: cgroups,
// bridge, shims and API route chain.
func (n *node) leftovers() []string {
	var out []string
	for _, c := range n.cgroups {
		if _, err := os.Stat(c); err == nil {
			out = append(out, "cgroup "+c)
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.bridge)); err == nil {
		out = append(out, "bridge "+n.bridge)
	}
	if pids := n.shimPIDs(); len(pids) > 0 {
		out = append(out, fmt.Sprintf("node %s: shim PIDs %v", n.name, pids))
	}
	if n.apiChain != "" && chainExists(iptChain{cmd: "iptables", table: "nat", chain: n.apiChain}) {
		out = append(out, "iptables chain nat/"+n.apiChain)
	}
	return out
}

// nodeNamed returns the kubelet-mode node of that name, or nil.
func (e *Env) nodeNamed(name string) *node {
	if e.node == nil {
		return nil
	}
	if e.node.name == name {
		return e.node
	}
	for _, x := range e.node.extra {
		if x.name == name {
			return x
		}
	}
	return nil
}

// KubeletNode returns the kubelet-mode node of that name (Options.NodeName
// or one of KubeletOptions.ExtraNodes) and whether there is one.
func (e *Env) KubeletNode(name string) (KubeletNode, bool) {
	n := e.nodeNamed(name)
	if n == nil {
		return KubeletNode{}, false
	}
	return KubeletNode{
		Name:              n.name,
		KubeletDir:        n.root,
		RegistrationDir:   filepath.Join(n.root, "plugins_registry"),
		PodLogDir:         filepath.Join(n.dir, "pod-logs"),
		ContainerdAddress: n.sock,
	}, true
}

// FreezeNode simulates a hung node: it stops (SIGSTOP) the node's kubelet
// and containerd, every process of its pods (the node's cgroup subtree:
// containers, shims are not in it) and the processes pids (e.g. a node
// plugin the test runs on the host for that node), in that order. The
// Node then stops reporting and turns NotReady after the controller
// manager's --node-monitor-grace-period; nothing of the node runs until
// thaw, which continues (SIGCONT) every process stopped, in reverse order.
// Call thaw before the test ends (e.g. in t.Cleanup): a stopped kubelet
// cannot delete its pods on Cleanup.
func (e *Env) FreezeNode(name string, pids ...int) (thaw func() error, err error) {
	n := e.nodeNamed(name)
	if n == nil {
		return nil, fmt.Errorf("kube: FreezeNode: no kubelet-mode node %q", name)
	}
	var stopped []int
	thaw = func() error {
		var errs []error
		for i := len(stopped) - 1; i >= 0; i-- {
			if err := syscall.Kill(stopped[i], syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("kube: SIGCONT %d: %w", stopped[i], err))
			}
		}
		stopped = nil
		return errors.Join(errs...)
	}
	stop := func(pid int) error {
		if pid <= 1 || slices.Contains(stopped, pid) {
			return nil
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return nil
			}
			return fmt.Errorf("kube: SIGSTOP %d: %w", pid, err)
		}
		stopped = append(stopped, pid)
		return nil
	}
	var first []int
	for _, p := range []*Process{n.kubelet, n.containerd} {
		if p != nil {
			first = append(first, p.PID())
		}
	}
	for _, pid := range append(first, n.cgroupPIDs()...) {
		if err := stop(pid); err != nil {
			return nil, errors.Join(err, thaw())
		}
	}
	for _, pid := range pids {
		if err := stop(pid); err != nil {
			return nil, errors.Join(err, thaw())
		}
	}
	return thaw, nil
}

// cgroupPIDs lists the processes in the node's cgroup subtrees (its pods).
func (n *node) cgroupPIDs() []int {
	var pids []int
	for _, root := range n.cgroups {
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}
