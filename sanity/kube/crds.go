package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

const snapshotClientModule = "github.com/kubernetes-csi/external-snapshotter/client/v8"

// snapshotCRDDir finds config/crd of the external-snapshotter client module
// this package is built with, through the go command.
func snapshotCRDDir(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", snapshotClientModule)
	if d, err := ModuleDir(); err == nil {
		cmd.Dir = d
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kube: locating %s (set Options.CRDDir): %w", snapshotClientModule, err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("kube: snapshot CRDs (set Options.CRDDir): %w", err)
	}
	return dir, nil
}

// installCRDs creates every CustomResourceDefinition in dir/*.yaml and
// waits until all are Established.
func installCRDs(ctx context.Context, cfg *rest.Config, dir string) error {
	cs, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("kube: %w", err)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(b, &crd); err != nil {
			return fmt.Errorf("kube: %s: %w", f, err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue // e.g. kustomization.yaml
		}
		_, err = cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kube: create CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	if len(names) == 0 {
		return fmt.Errorf("kube: no CustomResourceDefinition in %s", dir)
	}
	for _, n := range names {
		for {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
			if err == nil && established(crd) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kube: CRD %s not established: %w", n, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func established(crd *apiextv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
			return true
		}
	}
	return false
}
