//go:build linux

package upstream_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/internal/testenv"
)

// driverBinary returns the hostpathplugin to test: $CSIKIT_UPSTREAM_HOSTPATH_BIN,
// or one built from the tool module in ./hostpath (from a checkout named
// by $CSIKIT_UPSTREAM_HOSTPATH_SRC when set, else from the module proxy)
// into the build cache directory, where later runs find it.
func driverBinary(t *testing.T) string {
	if bin := os.Getenv(binEnv); bin != "" {
		return bin
	}
	toolDir, err := filepath.Abs("hostpath")
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	out := filepath.Join(cache, "csikit-upstream-hostpath")
	if err := os.MkdirAll(out, 0o750); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(toolDir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`github.com/kubernetes-csi/csi-driver-host-path (v\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatalf("%s/go.mod requires no csi-driver-host-path version", toolDir)
	}
	// The driver answers GetPluginInfo with Unavailable unless its release
	// build stamped a version into it.
	ldflags := "-ldflags=-X main.version=" + string(m[1])
	args := []string{"build", ldflags, "-o", out + string(os.PathSeparator), "tool"}
	// The tool module is in no go.work (its replaces would clash with
	// sanity/kube's): it builds on its own, GOWORK=off.
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if src := os.Getenv(srcEnv); src != "" {
		// A copy of the tool module that replaces the driver's module by
		// the checkout: the committed go.mod stays as it is.
		tmp := t.TempDir()
		for _, f := range []string{"go.mod", "go.sum"} {
			b, err := os.ReadFile(filepath.Join(toolDir, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tmp, f), b, 0o640); err != nil {
				t.Fatal(err)
			}
		}
		edit := exec.Command("go", "mod", "edit", "-replace=github.com/kubernetes-csi/csi-driver-host-path="+src)
		edit.Dir = tmp
		if b, err := edit.CombinedOutput(); err != nil {
			t.Fatalf("go mod edit: %v\n%s", err, b)
		}
		args = []string{"build", "-modfile=" + filepath.Join(tmp, "go.mod"), ldflags, "-o", out + string(os.PathSeparator), "tool"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = toolDir, env
	b, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(b), "not available") || strings.Contains(string(b), "403 Forbidden") {
			testenv.Skipf(t, "the module proxy does not serve github.com/kubernetes-csi/csi-driver-host-path (set %s to a checkout, or %s to a built hostpathplugin): %s", srcEnv, binEnv, lastLine(b))
		}
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), toolDir, err, b)
	}
	t.Logf("built hostpathplugin in %v", time.Since(start).Round(time.Millisecond))
	return filepath.Join(out, "hostpathplugin")
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
