package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Binaries of Kubernetes' own e2e tests, built by EnsureE2EBinaries from
// the k8s.io/kubernetes module of this module's go.mod (the release of
// kube-apiserver and kubelet).
const (
	// BinE2ETest is the storage-only build of Kubernetes' e2e.test: the
	// test binary of this module's internal/e2estorage (`go test -c -tags
	// e2estorage`), upstream's flags, suite setup and External.Storage
	// suites (-ginkgo.focus=External.Storage, -storage.testdriver) without
	// the other SIGs' specs. `go test -c k8s.io/kubernetes/test/e2e` in this
	// module builds the full suite, which selects the same storage specs.
	BinE2ETest = "e2e.test"
	// BinAgnhost is test/images/agnhost, the program of the suite's agnhost
	// image (the subPath cases run its mounttest).
	BinAgnhost = "agnhost"
	// BinKubectl is the suite's kubectl (-kubectl-path: some cases run
	// kubectl exec).
	BinKubectl = "kubectl"
	// BinGinkgo is the ginkgo CLI, which runs e2e.test's specs in
	// parallel processes (ginkgo -p).
	BinGinkgo = "ginkgo"
)

// e2eTools are the tool block's packages EnsureE2EBinaries builds and
// EnsureBinaries leaves out.
var e2eTools = map[string]bool{
	"k8s.io/kubernetes/test/images/agnhost": true,
	"k8s.io/kubernetes/cmd/kubectl":         true,
	"github.com/onsi/ginkgo/v2/ginkgo":      true,
}

// e2eSuitePackage is the package BinE2ETest is the test binary of, and
// e2eSuiteTag the build tag its test file needs.
const (
	e2eSuitePackage = "github.com/csikit/csikit/sanity/kube/internal/e2estorage"
	e2eSuiteTag     = "e2estorage"
)

// EnsureE2EBinaries returns a directory holding e2e.test (the storage-only
// suite, BinE2ETest), agnhost, kubectl and ginkgo of this module's
// Kubernetes release: the directory EnsureBinaries uses (the hash of
// go.mod and go.sum), so they are built once per go.mod with the same
// module and build cache as kube-apiserver and kubelet — the e2e
// framework's packages are largely those binaries' packages. e2e.test is
// rebuilt too when the source of its package (internal/e2estorage)
// changed: a stamp next to it holds that source's hash. A cold build takes
// minutes on two cores (it is not part of EnsureBinaries: only the e2e
// runner needs it).
func EnsureE2EBinaries(ctx context.Context, o BuildOptions) (string, error) {
	if err := o.defaults(); err != nil {
		return "", err
	}
	dir, err := toolsDir(o)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kube: %w", err)
	}
	suiteHash, err := e2eSuiteHash(o.ModuleDir)
	if err != nil {
		return "", err
	}
	stamp := filepath.Join(dir, BinE2ETest+".src")
	locked := false
	for _, b := range []struct {
		name string
		args []string
	}{
		{BinE2ETest, []string{"test", "-c", "-vet=off", "-ldflags=-w", "-tags", e2eSuiteTag, "-o", filepath.Join(dir, BinE2ETest) + ".tmp", e2eSuitePackage}},
		{BinAgnhost, []string{"build", "-ldflags=-w", "-o", filepath.Join(dir, BinAgnhost) + ".tmp", "k8s.io/kubernetes/test/images/agnhost"}},
		{BinKubectl, []string{"build", "-ldflags=-w", "-o", filepath.Join(dir, BinKubectl) + ".tmp", "k8s.io/kubernetes/cmd/kubectl"}},
		{BinGinkgo, []string{"build", "-ldflags=-w", "-o", filepath.Join(dir, BinGinkgo) + ".tmp", "github.com/onsi/ginkgo/v2/ginkgo"}},
	} {
		built := func() bool {
			if len(missingIn(dir, []string{b.name})) > 0 {
				return false
			}
			have, err := os.ReadFile(stamp)
			return b.name != BinE2ETest || err == nil && string(have) == suiteHash
		}
		if built() {
			continue
		}
		if !locked {
			// The same build lock as EnsureBinaries: a process that
			// started building these first finishes, and its binaries
			// are used (built() again).
			unlock, err := lockBuilds(ctx, o.CacheDir, o.Log)
			if err != nil {
				return "", err
			}
			defer unlock()
			locked = true
			if built() {
				continue
			}
		}
		cmd := exec.CommandContext(ctx, "go", b.args...)
		cmd.Dir = o.ModuleDir
		out, err := cmd.CombinedOutput()
		if o.Log != nil && len(out) > 0 {
			o.Log("go %s: %s", b.args[0], out)
		}
		if err != nil {
			return "", fmt.Errorf("kube: go %s: %w: %s", strings.Join(b.args, " "), err, lastLines(out, 20))
		}
		// Renamed into place complete: a build killed half-way leaves no
		// binary that looks built.
		if err := os.Rename(filepath.Join(dir, b.name)+".tmp", filepath.Join(dir, b.name)); err != nil {
			return "", fmt.Errorf("kube: %w", err)
		}
		if b.name == BinE2ETest {
			if err := os.WriteFile(stamp, []byte(suiteHash), 0o644); err != nil {
				return "", fmt.Errorf("kube: %w", err)
			}
		}
	}
	return dir, nil
}

// e2eSuiteHash is the hash of the files of internal/e2estorage in
// moduleDir (names and contents): the source of BinE2ETest that go.mod
// and go.sum do not cover.
func e2eSuiteHash(moduleDir string) (string, error) {
	src := filepath.Join(moduleDir, "internal", "e2estorage")
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", fmt.Errorf("kube: the e2e suite's source: %w", err)
	}
	h := sha256.New()
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return "", fmt.Errorf("kube: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// MissingE2EBinaries returns the names of the binaries EnsureE2EBinaries
// builds that dir lacks.
func MissingE2EBinaries(dir string) []string {
	return missingIn(dir, []string{BinE2ETest, BinAgnhost, BinKubectl, BinGinkgo})
}

// E2ERegistry is the registry the suite's test images are imported under:
// E2ERepoList points the suite's promoterE2eRegistry
// (registry.k8s.io/e2e-test-images) there, so nobody takes an image built
// here for the upstream one.
const E2ERegistry = "csikit.local/e2e-test-images"

// E2EImageTags are the images of Kubernetes' storage suites, by name, with
// the tags of test/utils/image/manifest.go in this module's release.
var E2EImageTags = map[string]string{
	"busybox": "1.37.0-2",
	"agnhost": "2.66.1",
	// The volumes suite's exec case runs /bin/sh in an nginx image; the
	// multivolume suite starts glibc-dns-testing pods that only sleep.
	"nginx":             "1.27.0-2",
	"glibc-dns-testing": "2.1.1",
}

// E2EImages writes, into dir, the image tarballs the storage suites run,
// each under E2ERegistry with the suite's tag: busybox from the host's
// static busybox (every applet in /bin), agnhost (binDir/agnhost, with its
// ELF interpreter and libraries) on the same busybox, nginx as busybox
// (the suites only run shell commands in it) and glibc-dns-testing as
// busybox with the host's GNU dd (coreutils) and shell, with their
// libraries: the multivolume suite's block cases write with dd
// oflag=nocache there, which busybox's dd refuses. Import them with KubeletOptions.Images and run the suite
// with KUBE_TEST_REPO_LIST=E2ERepoList(...). No image is pulled.
func E2EImages(ctx context.Context, dir, busybox, binDir string) ([]string, error) {
	out, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("kube: %s --list: %w", busybox, err)
	}
	bb, err := BusyboxFiles(busybox, strings.Fields(string(out)))
	if err != nil {
		return nil, err
	}
	agn, err := ExecutableFiles(filepath.Join(binDir, BinAgnhost), "/agnhost")
	if err != nil {
		return nil, err
	}
	glibc, err := glibcFiles(ctx, bb)
	if err != nil {
		return nil, err
	}
	var tars []string
	for _, img := range []struct {
		name  string
		cfg   ImageConfig
		files []ImageFile
	}{
		{"busybox", ImageConfig{Cmd: []string{"sh"}}, bb},
		{"agnhost", ImageConfig{Entrypoint: []string{"/agnhost"}}, append(slicesClone(bb), agn...)},
		{"nginx", ImageConfig{Cmd: []string{"sh"}}, bb},
		{"glibc-dns-testing", ImageConfig{Cmd: []string{"sh"}}, glibc},
	} {
		tar := filepath.Join(dir, "e2e-"+img.name+".tar")
		if err := WriteImage(tar, E2ERegistry+"/"+img.name+":"+E2EImageTags[img.name], img.cfg, img.files); err != nil {
			return nil, err
		}
		tars = append(tars, tar)
	}
	return tars, nil
}

// glibcFiles are the files of the glibc-dns-testing image: busybox's with
// /bin/dd the host's GNU dd (coreutils) and /bin/sh the host's shell
// (busybox's sh runs its own dd applet whatever /bin/dd is), with the
// libraries they need.
func glibcFiles(ctx context.Context, bb []ImageFile) ([]ImageFile, error) {
	dd, err := exec.LookPath("dd")
	if err != nil {
		return nil, fmt.Errorf("kube: the glibc-dns-testing image needs GNU dd (coreutils): %w", err)
	}
	if v, err := exec.CommandContext(ctx, dd, "--version").Output(); err != nil || !strings.Contains(string(v), "coreutils") {
		return nil, fmt.Errorf("kube: the glibc-dns-testing image needs GNU dd (coreutils), for oflag=nocache: %s is not (%v)", dd, err)
	}
	var host []ImageFile
	for _, p := range [][2]string{{dd, "/bin/dd"}, {"/bin/sh", "/bin/sh"}} {
		real, err := filepath.EvalSymlinks(p[0])
		if err != nil {
			return nil, fmt.Errorf("kube: the glibc-dns-testing image: %w", err)
		}
		fs, err := ExecutableFiles(real, p[1])
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			if !slices.ContainsFunc(host, func(g ImageFile) bool { return g.Path == f.Path }) {
				host = append(host, f)
			}
		}
	}
	var files []ImageFile
	for _, f := range bb {
		if !slices.ContainsFunc(host, func(g ImageFile) bool { return g.Path == f.Path }) {
			files = append(files, f)
		}
	}
	return append(files, host...), nil
}

func slicesClone(f []ImageFile) []ImageFile { return append([]ImageFile(nil), f...) }

// E2ERepoList writes the suite's KUBE_TEST_REPO_LIST file into dir: the
// e2e test images come from E2ERegistry.
func E2ERepoList(dir string) (string, error) {
	f := filepath.Join(dir, "repo-list.yaml")
	if err := os.WriteFile(f, []byte("promoterE2eRegistry: "+E2ERegistry+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("kube: %w", err)
	}
	return f, nil
}

// E2EOptions configure RunE2E.
type E2EOptions struct {
	// BinDir holds the binaries of EnsureE2EBinaries.
	BinDir string
	// Kubeconfig is the cluster's kubeconfig (Env.Kubeconfig).
	Kubeconfig string
	// TestDriver is the test-driver file (package k8s/testdriver, csikit
	// testdriver).
	TestDriver string
	// Focus and Skip are ginkgo regular expressions over the full spec
	// names (default focus External.Storage; Skip adds to
	// DefaultE2ESkip). LabelFilter is ginkgo's label filter (default
	// DefaultE2ELabelFilter).
	Focus, Skip, LabelFilter string
	// Procs is how many e2e.test processes ginkgo runs the specs in
	// (default 1: one process, no ginkgo CLI).
	Procs int
	// Dir receives the JUnit file (junit.xml), the repo list and the log
	// (e2e.log).
	Dir string
	// Timeout is the suite's overall timeout (ginkgo's --timeout; default
	// 3h).
	Timeout time.Duration
	// Args are more flags for e2e.test (e.g. "-storage.testdriver=..." for
	// a second driver).
	Args []string
	// Stdout, when set, receives the suite's output besides e2e.log.
	Stdout io.Writer
}

// DefaultE2ESkip is what a run on one shared node leaves out, as the
// upstream drivers' CI does: [Serial] and [Disruptive] specs (they need
// the cluster to themselves or restart its parts) and [Alpha] feature
// gates (off in this cluster).
const DefaultE2ESkip = `\[Serial\]|\[Disruptive\]|\[Alpha\]`

// DefaultE2ELabelFilter runs specs of no [Feature:...] but these: snapshots
// as a volume source (the snapshot controller and CRDs run here) and xfs
// (the node has it). The others (group snapshots, volume attributes
// classes, SELinux, features off by default) need what this cluster or
// the shipped deploy/ manifests do not turn on.
const DefaultE2ELabelFilter = `Feature: isSubsetOf {VolumeSnapshotDataSource, VolumeSourceXFS}`

// E2EResult is what a run of the suite found.
type E2EResult struct {
	// JUnit is the path of the JUnit report.
	JUnit string
	// Passed, Failed and Skipped count the specs that matched the focus
	// (specs left out by the focus or skip patterns are not counted).
	Passed, Failed, Skipped int
	// Failures are the names of the failed specs; Skips the skipped ones
	// with the suite's reason.
	Failures []string
	Skips    []E2ESkip
	// Duration is the suite's wall time.
	Duration time.Duration
}

// E2ESkip is one spec the suite skipped and its reason.
type E2ESkip struct{ Name, Reason string }

// Summary is the line "N passed, N failed, N skipped".
func (r *E2EResult) Summary() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", r.Passed, r.Failed, r.Skipped)
}

// RunE2E runs Kubernetes' e2e.test against the cluster of o.Kubeconfig
// with the storage suites of o.TestDriver, its test images from
// E2ERegistry, and returns the counts of its JUnit report. A failing spec
// is no error; a run that produced no report, ran no spec or failed with
// no failed spec in its report (interrupted) is.
func RunE2E(ctx context.Context, o E2EOptions) (*E2EResult, error) {
	if o.Focus == "" {
		o.Focus = "External.Storage"
	}
	skip := DefaultE2ESkip
	if o.Skip != "" {
		skip += "|" + o.Skip
	}
	if o.LabelFilter == "" {
		o.LabelFilter = DefaultE2ELabelFilter
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Hour
	}
	if o.Procs <= 0 {
		o.Procs = 1
	}
	repoList, err := E2ERepoList(o.Dir)
	if err != nil {
		return nil, err
	}
	junit := filepath.Join(o.Dir, "junit.xml")
	_ = os.Remove(junit)
	suite := []string{
		"-kubeconfig=" + o.Kubeconfig,
		"-kubectl-path=" + filepath.Join(o.BinDir, BinKubectl),
		"-storage.testdriver=" + o.TestDriver,
		"-provider=skeleton",
		"-allowed-not-ready-nodes=0",
		"-report-dir=" + o.Dir,
	}
	suite = append(suite, o.Args...)
	var cmd *exec.Cmd
	if o.Procs == 1 {
		args := []string{"-ginkgo.focus=" + o.Focus, "-ginkgo.skip=" + skip, "-ginkgo.label-filter=" + o.LabelFilter, "-ginkgo.junit-report=" + junit,
			"-ginkgo.timeout=" + o.Timeout.String(), "-ginkgo.no-color", "-ginkgo.v"}
		cmd = exec.CommandContext(ctx, filepath.Join(o.BinDir, BinE2ETest), append(args, suite...)...)
	} else {
		args := []string{"run", "--procs=" + strconv.Itoa(o.Procs), "--focus=" + o.Focus, "--skip=" + skip, "--label-filter=" + o.LabelFilter,
			"--junit-report=junit.xml", "--output-dir=" + o.Dir, "--timeout=" + o.Timeout.String(), "--no-color", "-v",
			filepath.Join(o.BinDir, BinE2ETest), "--"}
		cmd = exec.CommandContext(ctx, filepath.Join(o.BinDir, BinGinkgo), append(args, suite...)...)
	}
	cmd.Env = append(os.Environ(), "KUBE_TEST_REPO_LIST="+repoList)
	cmd.Dir = o.Dir
	log, err := os.Create(filepath.Join(o.Dir, "e2e.log"))
	if err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if o.Stdout != nil {
		cmd.Stdout = io.MultiWriter(log, o.Stdout)
		cmd.Stderr = cmd.Stdout
	}
	cmd.SysProcAttr = childAttr()
	start := time.Now()
	runErr := cmd.Run()
	res, err := ParseE2EJUnit(junit)
	if err != nil {
		return nil, fmt.Errorf("kube: e2e.test (%v) left no report (log: %s): %w", runErr, log.Name(), err)
	}
	res.Duration = time.Since(start)
	if runErr != nil && res.Failed == 0 {
		return nil, fmt.Errorf("kube: e2e.test: %w, but its report names no failed spec: interrupted or broken (log: %s)", runErr, log.Name())
	}
	if res.Passed+res.Failed+res.Skipped == 0 {
		return nil, fmt.Errorf("kube: e2e.test ran no spec (focus %q, skip %q; log: %s)", o.Focus, skip, log.Name())
	}
	return res, nil
}

// ParseE2EJUnit counts the specs of a JUnit report of e2e.test: passed,
// failed (failures and errors) and skipped, where a spec the focus or skip
// patterns left out ("skipped" with no reason of the suite's own) is not
// counted.
func ParseE2EJUnit(path string) (*E2EResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Suites []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Status  string `xml:"status,attr"`
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
				Failure *struct{} `xml:"failure"`
				Error   *struct{} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("kube: %s: %w", path, err)
	}
	r := &E2EResult{JUnit: path}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			switch {
			case c.Failure != nil || c.Error != nil:
				r.Failed++
				r.Failures = append(r.Failures, c.Name)
			case c.Skipped != nil:
				msg := strings.TrimSpace(c.Skipped.Message)
				if msg == "" || msg == "skipped" || c.Status == "pending" {
					continue // left out by the focus or skip patterns
				}
				r.Skipped++
				r.Skips = append(r.Skips, E2ESkip{Name: c.Name, Reason: strings.TrimPrefix(msg, "skipped - ")})
			case strings.HasPrefix(c.Name, "[SynchronizedBeforeSuite]") || strings.HasPrefix(c.Name, "[SynchronizedAfterSuite]") ||
				strings.HasPrefix(c.Name, "[ReportAfterSuite]") || strings.HasPrefix(c.Name, "[ReportBeforeSuite]") ||
				strings.HasPrefix(c.Name, "[BeforeSuite]") || strings.HasPrefix(c.Name, "[AfterSuite]") || strings.HasPrefix(c.Name, "[DeferCleanup (Suite)]"):
			default:
				r.Passed++
			}
		}
	}
	return r, nil
}
