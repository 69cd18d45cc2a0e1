// Package kube runs a CSI driver under the real Kubernetes CSI sidecars and
// controllers without a cluster: "envtest for CSI drivers".
//
// Start launches, as local processes on 127.0.0.1 and unix sockets only,
// etcd, kube-apiserver, kube-controller-manager (only the volume
// controllers), snapshot-controller with the snapshot CRDs installed, and
// csi-provisioner, csi-attacher, csi-resizer and csi-snapshotter pointed at
// the driver's endpoint. It hands back clients for the API server. No
// kubelet and no scheduler run: Pods are never started, a test plays the
// scheduler by setting spec.nodeName or the selected-node annotation.
// Options.Kubelet adds real nodes (containerd, kubelet, kube-scheduler),
// KubeletOptions.ExtraNodes more of them on the same host, each with its
// own containerd, and Env.FreezeNode hangs one, for node-loss tests.
//
// Invariants:
//   - Every process is started by this package, tracked by PID, and stopped
//     by PID (SIGTERM, then SIGKILL after a grace period) on the test's
//     Cleanup, also when the test fails or Start itself fails halfway. On
//     Linux each child also gets SIGKILL if the test binary dies.
//   - Everything written (certificates, keys, tokens, etcd data, sockets,
//     logs) lives under the test's own temporary directory.
//   - Servers listen on 127.0.0.1 or on unix sockets, never elsewhere.
//   - Sidecars exit when their CSI connection drops; the environment
//     restarts them with a short backoff, as kubelet would restart the
//     containers of a driver Pod.
//   - Binaries come from this module's tool block, built once per go.sum
//     into the user cache directory (or taken from Options.BinDir).
//
// The package holds no global state: no flags, environment variables or
// global loggers; process logs go to files under the temporary directory
// and their tails are logged when a test fails.
package kube
