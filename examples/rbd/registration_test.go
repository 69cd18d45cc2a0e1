//go:build linux

package main_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TestNodeRegistersItself runs the binary as node.yaml does — kubelet
// registration and /healthz served by the driver, no sidecars — and plays
// kubelet: the registration socket answers GetInfo with the driver's name
// and CSI socket, /healthz is 200 until kubelet reports the registration
// failed and 503 after, /metrics counts the CSI calls, and SIGTERM stops
// it cleanly with both sockets removed. It needs no Ceph cluster.
func TestNodeRegistersItself(t *testing.T) {
	bin := driverBinary(t)
	dir, err := os.MkdirTemp("", "rbdreg") // short: unix socket paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	regDir := filepath.Join(dir, "plugins_registry")
	if err := os.Mkdir(regDir, 0o750); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "csi.sock")
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--monitors", "127.0.0.1:1", "--endpoint", "unix://"+sock, "--nodeid", "node-1",
		"--state-dir", filepath.Join(dir, "state"), "--metrics-address", addr,
		"--kubelet-registration-path", sock, "--kubelet-registration-dir", regDir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	regSock := filepath.Join(regDir, "rbd.csikit.dev-reg.sock")
	waitSocket(t, regSock)
	waitSocket(t, sock)

	// kubelet's side of the registration.
	conn, err := grpc.NewClient("unix://"+regSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reg := registerapi.NewRegistrationClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != "rbd.csikit.dev" || info.GetEndpoint() != sock {
		t.Fatalf("GetInfo = %v; want a CSIPlugin named rbd.csikit.dev at %s", info, sock)
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz after registration: %d %s", code, body)
	}

	// A CSI call shows in /metrics.
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := csi.NewIdentityClient(cc).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, "http://"+addr+"/metrics"); !strings.Contains(body, `csi_plugin_operations_seconds_count{driver_name="rbd.csikit.dev",grpc_status_code="OK",method_name="/csi.v1.Identity/GetPluginInfo"} 1`) {
		t.Errorf("/metrics does not count the GetPluginInfo call:\n%s", grepLines(body, "csi_plugin_operations_seconds_count"))
	}

	// kubelet reports the registration failed: the liveness probe fails,
	// so kubelet restarts the pod.
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "version not supported"}); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, "http://"+addr+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "version not supported") {
		t.Errorf("/healthz after a failed registration: %d %q; want 503 with kubelet's error", code, body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM the driver exited with %v; want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the driver did not stop within 30s of SIGTERM")
	}
	for _, s := range []string{sock, regSock} {
		if _, err := os.Lstat(s); !os.IsNotExist(err) {
			t.Errorf("%s left behind after SIGTERM (%v)", s, err)
		}
	}
}

// freeAddr is a loopback address nothing listens on (just now).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitSocket(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("socket %s never appeared", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		if resp, err = http.Get(url); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // the HTTP server may start after the sockets
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
