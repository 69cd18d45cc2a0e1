package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Binary names, as `go build` names the tool packages of this module.
const (
	BinEtcd               = "server" // go.etcd.io/etcd/server/v3
	BinAPIServer          = "kube-apiserver"
	BinControllerManager  = "kube-controller-manager"
	BinProvisioner        = "csi-provisioner"
	BinAttacher           = "csi-attacher"
	BinResizer            = "csi-resizer"
	BinSnapshotter        = "csi-snapshotter"
	BinSnapshotController = "snapshot-controller"
	BinKubelet            = "kubelet"        // the kubelet mode (Options.Kubelet)
	BinScheduler          = "kube-scheduler" // the kubelet mode (Options.Kubelet)
)

// Binary names of the container runtime module (RuntimeModuleDir), built by
// EnsureRuntimeBinaries for the kubelet mode.
const (
	BinContainerd = "containerd"
	BinShim       = "containerd-shim-runc-v2"
	BinCtr        = "ctr"
)

func binaryNames() []string {
	return []string{BinEtcd, BinAPIServer, BinControllerManager, BinProvisioner,
		BinAttacher, BinResizer, BinSnapshotter, BinSnapshotController, BinKubelet, BinScheduler}
}

func runtimeBinaryNames() []string { return []string{BinContainerd, BinShim, BinCtr} }

// ModuleDir returns the directory of this module's source (where its go.mod
// and tool block are), from the location this file was compiled from.
func ModuleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("kube: cannot locate the module source")
	}
	dir := filepath.Dir(file)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("kube: module source %s not found (set Options.BinDir to prebuilt binaries): %w", dir, err)
	}
	return dir, nil
}

// BuildOptions configure EnsureBinaries.
type BuildOptions struct {
	// ModuleDir is the module whose tool block is built (default ModuleDir()).
	ModuleDir string
	// CacheDir is the root under which binaries are kept, one directory per
	// go.sum hash (default os.UserCacheDir()/csikit-kube).
	CacheDir string
	// Log, when set, receives the go command's output.
	Log func(format string, args ...any)
}

// EnsureBinaries returns a directory holding every binary Start needs. It
// reuses <CacheDir>/<hash of go.mod and go.sum> when complete, and otherwise
// builds the module's tool block into it with one `go build` (a cold build
// takes minutes; later builds reuse the Go build cache).
func EnsureBinaries(ctx context.Context, o BuildOptions) (string, error) {
	if err := o.defaults(); err != nil {
		return "", err
	}
	return ensureTools(ctx, o, o.CacheDir, binaryNames(), nil, func(pkg string) bool { return !e2eTools[pkg] })
}

// BinariesDir returns the directory EnsureBinaries builds into and reuses
// for this module's go.mod and go.sum, without building anything. A test
// that must not spend minutes on a cold build (one with its own timeout,
// or in a module that does not build the tools itself) checks
// MissingBinaries(dir) and skips, or fails in CI, when they are not built;
// `go run ./internal/buildtools` in this module builds them.
func BinariesDir(o BuildOptions) (string, error) {
	if err := o.defaults(); err != nil {
		return "", err
	}
	return toolsDir(o)
}

func (o *BuildOptions) defaults() error {
	if o.ModuleDir == "" {
		d, err := ModuleDir()
		if err != nil {
			return err
		}
		o.ModuleDir = d
	}
	if o.CacheDir == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("kube: no cache directory (set BuildOptions.CacheDir): %w", err)
		}
		o.CacheDir = filepath.Join(c, "csikit-kube")
	}
	return nil
}

// EnsureRuntimeBinaries is EnsureBinaries for the container runtime of the
// kubelet mode (containerd, its runc shim and ctr), from the tool block of
// the separate module in <ModuleDir>/runtime (from a module cache: that
// module at this module's version, downloaded), into
// <CacheDir>/runtime/<hash>. BuildOptions.ModuleDir is the kube module's
// directory, as for EnsureBinaries.
func EnsureRuntimeBinaries(ctx context.Context, o BuildOptions) (string, error) {
	if err := o.defaults(); err != nil {
		return "", err
	}
	dir, err := runtimeModuleDir(ctx, o.ModuleDir)
	if err != nil {
		return "", err
	}
	o.ModuleDir = dir
	lockDir := o.CacheDir
	o.CacheDir = filepath.Join(o.CacheDir, "runtime")
	// The runtime module is in no go.work (its replaces would clash with
	// this module's) and requires no csikit module: it builds on its own.
	return ensureTools(ctx, o, lockDir, runtimeBinaryNames(), []string{"GOWORK=off"}, nil)
}

// runtimeModule is the module path of the container runtime's tool module.
const runtimeModule = "github.com/csikit/csikit/sanity/kube/runtime"

// runtimeModuleDir returns the directory of the container runtime's module:
// <kubeDir>/runtime in a checkout. A module cache holds a nested module
// apart from its parent (no module's zip contains another's go.mod), so
// there, with kubeDir named "...@VERSION", it is runtimeModule at the same
// VERSION, fetched with `go mod download` (every module is released at one
// version).
func runtimeModuleDir(ctx context.Context, kubeDir string) (string, error) {
	dir := filepath.Join(kubeDir, "runtime")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		return dir, nil
	}
	_, version, ok := strings.Cut(filepath.Base(kubeDir), "@")
	if !ok {
		return "", fmt.Errorf("kube: %s has no runtime/go.mod and is not a module cache directory (set KubeletOptions.RuntimeBinDir to prebuilt binaries)", kubeDir)
	}
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", runtimeModule+"@"+version)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); jerr == nil && mod.Error != "" {
		return "", fmt.Errorf("kube: go mod download %s@%s: %s", runtimeModule, version, mod.Error)
	}
	if err != nil {
		return "", fmt.Errorf("kube: go mod download %s@%s: %w", runtimeModule, version, err)
	}
	if mod.Dir == "" {
		return "", fmt.Errorf("kube: go mod download %s@%s gave no directory: %s", runtimeModule, version, out)
	}
	return mod.Dir, nil
}

// ensureTools builds the tool block of o.ModuleDir into
// <o.CacheDir>/<hash>, unless names are all there already; env is added to
// the go command's environment; include, when set, picks the tool packages
// built. A build holds the build lock of lockDir (lockBuilds): a process
// that finds the binaries missing while another builds them waits for that
// build rather than compiling the same packages beside it.
func ensureTools(ctx context.Context, o BuildOptions, lockDir string, names []string, env []string, include func(pkg string) bool) (string, error) {
	dir, err := toolsDir(o)
	if err != nil {
		return "", err
	}
	if missing := missingIn(dir, names); len(missing) == 0 {
		return dir, nil
	}
	unlock, err := lockBuilds(ctx, lockDir, o.Log)
	if err != nil {
		return "", err
	}
	defer unlock()
	if missing := missingIn(dir, names); len(missing) == 0 {
		return dir, nil // built by the process we waited for
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kube: %w", err)
	}
	tools, err := toolPackages(ctx, o.ModuleDir)
	if err != nil {
		return "", err
	}
	if include != nil {
		tools = slices.DeleteFunc(tools, func(p string) bool { return !include(p) })
	}
	// -ldflags=-w: no DWARF. Nobody debugs these binaries with a
	// debugger, and leaving it out takes about 40% off each link (kube-apiserver: 24
	// to 14.5 CPU-seconds), a dozen large links in a cold build; stack
	// traces do not need it.
	args := append([]string{"build", "-ldflags=-w", "-o", dir + string(os.PathSeparator)}, tools...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.ModuleDir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if o.Log != nil && len(out) > 0 {
		o.Log("go build: %s", out)
	}
	if err != nil {
		return "", fmt.Errorf("kube: go build %s: %w: %s", strings.Join(tools, " "), err, lastLines(out, 20))
	}
	if missing := missingIn(dir, names); len(missing) > 0 {
		return "", fmt.Errorf("kube: go build left out %v in %s", missing, dir)
	}
	removeStale(o.CacheDir, filepath.Base(dir))
	return dir, nil
}

// toolsDir is <o.CacheDir>/<hash of o.ModuleDir's go.mod and go.sum>.
func toolsDir(o BuildOptions) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(o.ModuleDir, f))
		if err != nil {
			return "", fmt.Errorf("kube: %w", err)
		}
		h.Write(b)
	}
	return filepath.Join(o.CacheDir, hex.EncodeToString(h.Sum(nil))[:16]), nil
}

// removeStale deletes binary directories of other go.mod/go.sum versions
// (about 1 GB each) once a new one is complete; only names this package
// makes (16 hex digits) are touched.
func removeStale(cacheDir, keep string) {
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		if n == keep || !e.IsDir() || len(n) != 16 || strings.Trim(n, "0123456789abcdef") != "" {
			continue
		}
		_ = os.RemoveAll(filepath.Join(cacheDir, n))
	}
}

// MissingBinaries returns the names of the binaries Start needs that dir lacks.
func MissingBinaries(dir string) []string { return missingIn(dir, binaryNames()) }

// MissingRuntimeBinaries returns the names of the container runtime's
// binaries (EnsureRuntimeBinaries) that dir lacks.
func MissingRuntimeBinaries(dir string) []string { return missingIn(dir, runtimeBinaryNames()) }

func missingIn(dir string, names []string) []string {
	var missing []string
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, n)
		}
	}
	return missing
}

// toolPackages lists the tool block of the module in dir.
func toolPackages(ctx context.Context, dir string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "edit", "-json")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kube: go mod edit -json in %s: %w", dir, err)
	}
	var mod struct{ Tool []struct{ Path string } }
	if err := json.Unmarshal(out, &mod); err != nil {
		return nil, fmt.Errorf("kube: go mod edit -json in %s: %w", dir, err)
	}
	var tools []string
	for _, t := range mod.Tool {
		tools = append(tools, t.Path)
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("kube: %s/go.mod has an empty tool block", dir)
	}
	return tools, nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
