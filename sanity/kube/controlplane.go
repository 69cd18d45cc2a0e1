package kube

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("kube: no free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// controlPlaneFiles writes the service-account key pair, the token file and
// the kubeconfig under dir, and returns the admin token.
func controlPlaneFiles(dir string) (token string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", fmt.Errorf("kube: service-account key: %w", err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", fmt.Errorf("kube: service-account key: %w", err)
	}
	pub := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	var tok [24]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return "", fmt.Errorf("kube: token: %w", err)
	}
	token = hex.EncodeToString(tok[:])
	files := map[string][]byte{
		"sa.key":     priv,
		"sa.pub":     pub,
		"tokens.csv": []byte(token + `,admin,admin,"system:masters"` + "\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return "", fmt.Errorf("kube: %w", err)
		}
	}
	return token, nil
}

// writeKubeconfig writes a kubeconfig for host with the bearer token.
func writeKubeconfig(path, host, token string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: local
  context:
    cluster: local
    user: admin
current-context: local
`, host, token)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

func etcdArgs(dir string, client, peer int) []string {
	c := "http://127.0.0.1:" + strconv.Itoa(client)
	pe := "http://127.0.0.1:" + strconv.Itoa(peer)
	return []string{
		"--name=default",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + c, "--advertise-client-urls=" + c,
		"--listen-peer-urls=" + pe, "--initial-advertise-peer-urls=" + pe,
		"--initial-cluster=default=" + pe,
		"--unsafe-no-fsync", "--quota-backend-bytes=2147483648",
		"--log-level=warn",
	}
}

func apiServerArgs(dir string, port, etcdPort int) []string {
	return []string{
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(etcdPort),
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--disable-admission-plugins=ServiceAccount",
		"--v=1",
	}
}

func controllerManagerArgs(dir, kubeconfig string, port int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--leader-elect=false",
		"--controllers=" + "persistentvolume-binder-controller,persistentvolume-expander-controller," +
			"persistentvolume-attach-detach-controller,persistentvolumeclaim-protection-controller," +
			"persistentvolume-protection-controller,serviceaccount-controller",
		"--service-account-private-key-file=" + filepath.Join(dir, "sa.key"),
		"--use-service-account-credentials=false",
		"--pvclaimbinder-sync-period=1s",
		"--attach-detach-reconcile-sync-period=1s",
		"--disable-attach-detach-reconcile-sync=false",
		"--v=2",
	}
}

// kubeletModeArgs adapts the control plane to a real kubelet: the API
// server reaches it by the Node's InternalIP (logs, exec); the node
// lifecycle controller removes the not-ready taint once it reports Ready;
// the DaemonSet, Deployment and ReplicaSet controllers run workloads (a
// driver's deploy manifests); and pods get service-account credentials as
// in a cluster: the ServiceAccount admission plugin adds the projected
// token volume, and the root CA publisher writes the kube-root-ca.crt
// ConfigMap it mounts (the API server's self-signed certificate bundle in
// dir/certs, which names the kubernetes Service's ClusterIP).
func kubeletModeArgs(api, kcm []string, dir string) ([]string, []string) {
	out := make([]string, 0, len(api)+1)
	for _, a := range api {
		if a != "--disable-admission-plugins=ServiceAccount" {
			out = append(out, a)
		}
	}
	api = append(out, "--kubelet-preferred-address-types=InternalIP")
	for i, a := range kcm {
		if strings.HasPrefix(a, "--controllers=") {
			kcm[i] = a + ",node-lifecycle-controller,daemonset-controller,deployment-controller," +
				"replicaset-controller,root-ca-certificate-publisher-controller"
		}
	}
	kcm = append(kcm, "--root-ca-file="+filepath.Join(dir, "certs", "apiserver.crt"))
	return api, kcm
}

// waitReady polls the API server's /readyz until it answers 200 or ctx ends.
func waitReady(ctx context.Context, cfg *rest.Config, proc *Process) error {
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	hc := &http.Client{Transport: rt, Timeout: 2 * time.Second}
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if !proc.Running() {
			return fmt.Errorf("kube: %s exited before it was ready (log: %s)", proc.Name, proc.LogPath)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube: %s not ready: %s: %w", proc.Name, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
