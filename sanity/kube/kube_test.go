package kube_test

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/sanity/kube"
)

// startPrereqs skips t where the environment cannot run.
func startPrereqs(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs linux: the control-plane binaries are built for it")
	}
	if _, err := exec.LookPath("go"); err != nil {
		testenv.Skipf(t, "needs the go command to build or locate the control-plane binaries: %v", err)
	}
}

func createNamespace(t *testing.T, env *kube.Env) {
	t.Helper()
	_, err := env.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	// With the ServiceAccount admission plugin (the kubelet mode) a pod is
	// refused until the controller manager has made the namespace's
	// default ServiceAccount.
	kube.WaitFor(t, wait, "ServiceAccount "+ns+"/default", func(ctx context.Context) (bool, string, error) {
		_, err := env.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err), nil
	})
}

// startFake serves a fresh fakeDriver and starts an environment for it.
func startFake(t *testing.T) (*kube.Env, *kube.Driver, *fakeDriver) {
	t.Helper()
	startPrereqs(t)
	fake := newFakeDriver()
	drv := kube.ServeDriver(t, fake.server)
	env := kube.Start(t, kube.Options{
		Endpoint:     drv.Endpoint,
		DriverName:   fakeDriverName,
		NodeTopology: map[string]string{zoneKey: "zone-a"},
		Timeout:      3 * time.Second,
	})
	createNamespace(t, env)
	return env, drv, fake
}

// TestScenarios drives the in-memory fake driver through the real sidecars
// and controllers. Each scenario checks the API objects and the requests
// the driver received.
func TestScenarios(t *testing.T) {
	start := time.Now()
	env, drv, fake := startFake(t)
	t.Logf("environment ready in %s", time.Since(start).Round(time.Millisecond))
	newH := func(t *testing.T) *h {
		return &h{t: t, env: env, ctx: context.Background(), zoneKey: zoneKey, zone: "zone-a", fake: true}
	}

	t.Run("api", func(t *testing.T) {
		for _, sc := range apiScenarios {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				sc.run(newH(t), fake)
			})
		}
	})
	t.Run("faults", func(t *testing.T) {
		t.Run("driver-restart-while-provisioning", func(t *testing.T) { driverRestart(newH(t), fake, drv) })
		t.Run("create-slower-than-timeout", func(t *testing.T) { slowCreate(newH(t), fake) })
		t.Run("aborted-then-success", func(t *testing.T) { abortedCreate(newH(t), fake) })
	})
}

// driverRestart stops the driver while PVCs are being provisioned and
// starts it again: every PVC ends Bound with exactly one backend volume.
func driverRestart(h *h, fake *fakeDriver, drv *kube.Driver) {
	h.storageClass("restart", func(sc *storagev1.StorageClass) { sc.Parameters["delay"] = "2s" })
	names := []string{"restart-0", "restart-1", "restart-2", "restart-3"}
	for _, n := range names {
		h.pvc(n, "restart", "1Gi", nil)
	}
	kube.WaitFor(h.t, wait, "a CreateVolume in flight", func(ctx context.Context) (bool, string, error) {
		return len(fake.createsWith("delay")) > 0, fake.String(), nil
	})
	if err := drv.Stop(); err != nil {
		h.t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := drv.Start(); err != nil {
		h.t.Fatal(err)
	}
	for _, n := range names {
		_, pv := h.bound(n)
		if got := fake.volumesNamed(pv.Name); got != 1 {
			h.t.Errorf("PVC %s: got %d backend volumes named %s, want 1", n, got, pv.Name)
		}
		if v := fake.volume(pv.Spec.CSI.VolumeHandle); v == nil {
			h.t.Errorf("PVC %s: PV %s has volume handle %s, which the driver does not have", n, pv.Name, pv.Spec.CSI.VolumeHandle)
		}
	}
	if got := len(h.pvsOfClass("restart")); got != len(names) {
		h.t.Errorf("got %d PVs of class restart, want %d", got, len(names))
	}
	h.t.Logf("csi-provisioner started %d times", h.env.Process(kube.BinProvisioner).Starts())
}

// slowCreate: the first CreateVolume outlasts the sidecar's --timeout; the
// retries end with one volume.
func slowCreate(h *h, fake *fakeDriver) {
	h.storageClass("slow", func(sc *storagev1.StorageClass) { sc.Parameters["delay"] = "6s" })
	h.pvc("slow", "slow", "1Gi", nil)
	_, pv := h.bound("slow")
	if got := len(fake.createsNamed(pv.Name)); got < 2 {
		h.t.Errorf("got %d CreateVolume calls for %s, want at least 2 (a timeout and a retry)", got, pv.Name)
	}
	if got := fake.volumesNamed(pv.Name); got != 1 {
		h.t.Errorf("got %d backend volumes named %s, want 1", got, pv.Name)
	}
}

// abortedCreate: the driver answers Aborted three times; the provisioner
// backs off and the fourth call provisions.
func abortedCreate(h *h, fake *fakeDriver) {
	h.storageClass("aborted", func(sc *storagev1.StorageClass) { sc.Parameters["abort"] = "3" })
	h.pvc("aborted", "aborted", "1Gi", nil)
	_, pv := h.bound("aborted")
	if got := len(fake.createsNamed(pv.Name)); got != 4 {
		h.t.Errorf("got %d CreateVolume calls for %s, want 4 (3 Aborted, 1 success)", got, pv.Name)
	}
	if got := fake.volumesNamed(pv.Name); got != 1 {
		h.t.Errorf("got %d backend volumes named %s, want 1", got, pv.Name)
	}
}

// capOf returns a PVC's status capacity in bytes.
func capOf(c *corev1.PersistentVolumeClaim) int64 {
	q := c.Status.Capacity[corev1.ResourceStorage]
	return q.Value()
}

func hasMode(caps []*csi.VolumeCapability, m csi.VolumeCapability_AccessMode_Mode) bool {
	return slices.ContainsFunc(caps, func(c *csi.VolumeCapability) bool { return c.GetAccessMode().GetMode() == m })
}
