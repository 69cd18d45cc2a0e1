//go:build linux

package main_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/csikit/csikit/examples/hostpath/driver"
)

// TestDeployedStorageClassesNameFSTypeForKubelet: every StorageClass in
// deploy/ that selects a filesystem names it with
// csi.storage.k8s.io/fstype, never the driver's own fsType parameter. The
// driver takes either, but only the former reaches the PV's
// spec.csi.fsType, and kubelet applies a pod's fsGroup (and
// fsGroupChangePolicy) only to a CSI volume whose PV has an fsType when
// the CSIDriver's fsGroupPolicy is ReadWriteOnceWithFSType.
func TestDeployedStorageClassesNameFSTypeForKubelet(t *testing.T) {
	files, err := filepath.Glob("deploy/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	classes := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(b, []byte("\n---\n")) {
			var obj struct {
				Kind       string
				Metadata   struct{ Name string }
				Parameters map[string]string
			}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if obj.Kind != "StorageClass" {
				continue
			}
			classes++
			if fs, ok := obj.Parameters[driver.ParamFSType]; ok {
				t.Errorf("%s: StorageClass %s has parameters.%s: %s: kubelet does not apply fsGroup to its volumes; "+
					"name the filesystem with csi.storage.k8s.io/fstype: %s", f, obj.Metadata.Name, driver.ParamFSType, fs, fs)
			}
		}
	}
	if classes < 3 {
		t.Fatalf("found %d StorageClasses in deploy/, want the default, xfs and encrypted ones", classes)
	}
}
