package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Env is a running control plane with the CSI sidecars attached to one
// driver. Create it with Start; it stops itself on the test's Cleanup.
type Env struct {
	// Config reaches the API server as a member of system:masters.
	Config *rest.Config
	// Client and Snapshots are clients built from Config.
	Client    kubernetes.Interface
	Snapshots snapclient.Interface
	// Kubeconfig is the path of a kubeconfig file for the same identity.
	Kubeconfig string
	// Dir holds everything the environment wrote, process logs included
	// (<Dir>/<process>.log).
	Dir string
	// Opts are the options in force, defaults filled in.
	Opts Options

	mu     sync.Mutex
	procs  []*Process
	driver *Process // Options.Driver
	node   *node    // the kubelet mode (Options.Kubelet)
}

// Start starts etcd, kube-apiserver, kube-controller-manager,
// snapshot-controller and the sidecars for opts.Endpoint, registers a fake
// Node and its CSINode, and returns once the API server is ready. Any
// failure fails t; everything started is stopped on t's Cleanup, also then.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	e, err := start(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func start(t testing.TB, opts Options) (*Env, error) {
	opts.defaults()
	if opts.DriverName == "" {
		return nil, errors.New("kube: Options.DriverName is required")
	}
	sock, ok := socketPath(opts.Endpoint)
	if !ok && len(opts.Sidecars) > 0 {
		return nil, fmt.Errorf("kube: Options.Endpoint %q: want unix:///abs/path or /abs/path", opts.Endpoint)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t0 := time.Now()
	if opts.BinDir == "" {
		// A cold build takes minutes: not bounded by the start timeout.
		d, err := EnsureBinaries(context.Background(), BuildOptions{})
		if err != nil {
			return nil, err
		}
		opts.BinDir = d
	} else if m := MissingBinaries(opts.BinDir); len(m) > 0 {
		return nil, fmt.Errorf("kube: Options.BinDir %s lacks %v", opts.BinDir, m)
	}
	if opts.CRDDir == "" {
		d, err := snapshotCRDDir(ctx)
		if err != nil {
			return nil, err
		}
		opts.CRDDir = d
	}
	dir, err := os.MkdirTemp("", "csikit-kube-")
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	e := &Env{Dir: dir, Opts: opts, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	if opts.Kubelet != nil && opts.Kubelet.CheckLeftovers {
		// Registered first, so it runs after the environment's stop.
		t.Cleanup(func() {
			if left := e.Leftovers(); len(left) > 0 {
				t.Errorf("the kubelet mode left on the host: %v", left)
			}
		})
	}
	t.Cleanup(func() { e.stop(t) })

	if opts.Driver != nil {
		// First: the driver initializes while the control plane starts.
		do := *opts.Driver
		if do.LogDir == "" {
			do.LogDir = dir
		}
		if do.StopGrace <= 0 {
			do.StopGrace = opts.StopGrace
		}
		p, err := StartProcess(do)
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		e.procs, e.driver = append(e.procs, p), p
		e.mu.Unlock()
	}
	token, err := controlPlaneFiles(dir)
	if err != nil {
		return nil, err
	}
	var ports [4]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	etcdPort, peerPort, apiPort, kcmPort := ports[0], ports[1], ports[2], ports[3]
	if _, err := e.run(BinEtcd, etcdArgs(dir, etcdPort, peerPort), false); err != nil {
		return nil, err
	}
	apiArgs, kcmArgs := apiServerArgs(dir, apiPort, etcdPort), controllerManagerArgs(dir, e.Kubeconfig, kcmPort)
	if opts.Kubelet != nil {
		apiArgs, kcmArgs = kubeletModeArgs(apiArgs, kcmArgs, dir)
	}
	api, err := e.run(BinAPIServer, apiArgs, false)
	if err != nil {
		return nil, err
	}
	host := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	if err := writeKubeconfig(e.Kubeconfig, host, token); err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	e.Config = &rest.Config{Host: host, BearerToken: token, QPS: 200, Burst: 400,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	t1 := time.Now()
	if err := waitReady(ctx, e.Config, api); err != nil {
		return nil, err
	}
	t2 := time.Now()
	if e.Client, err = kubernetes.NewForConfig(e.Config); err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	if e.Snapshots, err = snapclient.NewForConfig(e.Config); err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	if opts.Kubelet == nil {
		if err := e.registerNode(ctx); err != nil {
			return nil, err
		}
	}
	if err := installCRDs(ctx, e.Config, opts.CRDDir); err != nil {
		return nil, err
	}
	if _, err := e.run(BinControllerManager, kcmArgs, true); err != nil {
		return nil, err
	}
	if _, err := e.run(BinSnapshotController, snapshotControllerArgs(e.Kubeconfig), true); err != nil {
		return nil, err
	}
	for _, s := range opts.Sidecars {
		args, err := sidecarArgs(s, sock, e.Kubeconfig, &opts)
		if err != nil {
			return nil, err
		}
		var env []string
		if s == BinProvisioner && opts.Kubelet != nil {
			// The scheduler checks CSIStorageCapacity for a driver with
			// storageCapacity: true (examples/hostpath's CSIDriver), as in a
			// real deployment. The objects go to NAMESPACE, without owner.
			args = append(args, "--enable-capacity", "--capacity-ownerref-level=-1", "--capacity-poll-interval=5s")
			env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir, "NAMESPACE=default"}
		}
		if _, err := e.runPath(s, filepath.Join(opts.BinDir, s), args, true, env); err != nil {
			return nil, err
		}
	}
	if opts.Kubelet != nil {
		// Not bounded by ctx: EnsureRuntimeBinaries may build, and the
		// node has its own ReadyTimeout.
		if err := e.startNode(t, context.Background()); err != nil {
			return nil, err
		}
	}
	t.Logf("kube: binaries and CRDs located in %s, API server ready in %s, all started in %s",
		t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	return e, nil
}

// run starts a binary of BinDir with the ExtraArgs for its name.
func (e *Env) run(name string, args []string, restart bool) (*Process, error) {
	return e.runPath(name, filepath.Join(e.Opts.BinDir, name), args, restart, nil)
}

// runPath starts the binary at path with the ExtraArgs for name and env
// (nil: StartProcess's default).
func (e *Env) runPath(name, path string, args []string, restart bool, env []string) (*Process, error) {
	args = append(args, e.Opts.ExtraArgs[name]...)
	p, err := StartProcess(ProcessOptions{Name: name, Path: path, Args: args, Env: env,
		LogDir: e.Dir, Restart: restart, StopGrace: e.Opts.StopGrace})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p, nil
}

// Process returns the running process of that name (e.g. "csi-provisioner",
// BinAPIServer), or nil.
func (e *Env) Process(name string) *Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// registerNode creates the fake Node (controller-managed attach/detach,
// topology labels) and its CSINode entry for the driver.
func (e *Env) registerNode(ctx context.Context) error {
	o := &e.Opts
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        o.NodeName,
		Labels:      map[string]string{"kubernetes.io/hostname": o.NodeName},
		Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
	}}
	var keys []string
	for k, v := range o.NodeTopology {
		node.Labels[k] = v
		keys = append(keys, k)
	}
	if _, err := e.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kube: create Node: %w", err)
	}
	csiNode := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: o.NodeName},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
			Name: o.DriverName, NodeID: o.NodeID, TopologyKeys: keys,
		}}},
	}
	if _, err := e.Client.StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kube: create CSINode: %w", err)
	}
	return nil
}

// stop stops every process by PID, newest first (sidecars before the
// controllers, the API server before etcd), logs the tails of their logs
// when t failed, and removes Dir.
func (e *Env) stop(t testing.TB) {
	keepDir := false
	if e.node != nil {
		// Before the control plane: kubelet unpublishes volumes of deleted
		// pods, and the node's host state goes by exact path.
		for _, err := range e.stopNode() {
			t.Error(err)
		}
		if mps, err := mountsBelow(e.Dir); err != nil || len(mps) > 0 {
			// Never remove a tree with a volume still mounted in it.
			t.Errorf("kube: keeping %s: mounts below it remain: %v %v", e.Dir, mps, err)
			keepDir = true
		}
	}
	e.mu.Lock()
	procs, drv := e.procs, e.driver
	e.procs = nil
	e.mu.Unlock()
	// Sidecars and controllers in parallel; then, newest first, the API
	// server, etcd and Options.Driver (started first: no sidecar calls it
	// any more).
	var wg sync.WaitGroup
	var core []*Process
	for _, p := range procs {
		if p.Name == BinAPIServer || p.Name == BinEtcd || p == drv {
			core = append(core, p)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Stop(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for i := len(core) - 1; i >= 0; i-- {
		if err := core[i].Stop(); err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		for _, p := range procs {
			b, _ := os.ReadFile(p.LogPath)
			n := 25
			if e.node != nil && (p.Name == BinKubelet || p.Name == BinContainerd) {
				n = 80
			}
			t.Logf("--- %s (started %d times), last lines of %s:\n%s", p.Name, p.Starts(), p.LogPath, lastLines(b, n))
		}
	}
	if keepDir {
		return
	}
	if err := os.RemoveAll(e.Dir); err != nil {
		t.Errorf("kube: remove %s: %v", e.Dir, err)
	}
}

// socketPath returns the filesystem path of a unix endpoint.
func socketPath(ep string) (string, bool) {
	p := strings.TrimPrefix(ep, "unix://")
	return p, filepath.IsAbs(p)
}
