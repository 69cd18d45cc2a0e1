//go:build e2estorage

package e2estorage

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/component-base/version"
	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"
	"k8s.io/kubernetes/test/e2e/framework/testfiles"
	testingmanifests "k8s.io/kubernetes/test/e2e/testing-manifests"
	"k8s.io/kubernetes/test/fixtures"

	// The feature and label constants the specs are tagged with.
	_ "k8s.io/kubernetes/test/e2e/feature"
	// The specs: -storage.testdriver=FILE declares the External.Storage
	// suites of the driver FILE describes.
	_ "k8s.io/kubernetes/test/e2e/storage/external"
	// The framework's hooks e2e.test installs: dumps on failure, metrics
	// grabbing, node checks, and the failure message formatting.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"
)

// TestMain takes the command line e2e.test takes (the framework's common
// and cluster flags, the flags packages register in framework/config, such
// as -storage.testdriver, and ginkgo's and go test's own), then runs the
// suite. Upstream's -list-conformance-tests and the logcheck invariant's
// flags are left out: neither concerns the storage suites.
func TestMain(m *testing.M) {
	showVersion := flag.Bool("version", false, "print the Kubernetes release the suite is from, and exit")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Get())
		os.Exit(0)
	}
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "e2e.test (storage): unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	// The manifests and fixtures the suites read (test/e2e/testing-manifests
	// and test/fixtures), embedded as upstream's binary embeds them.
	testfiles.AddFileSource(testingmanifests.GetE2ETestingManifestsFS())
	testfiles.AddFileSource(fixtures.GetTestFixturesFS())
	framework.AfterReadingAllFlags(&framework.TestContext)
	if root := framework.TestContext.RepoRoot; root != "" {
		testfiles.AddFileSource(testfiles.RootFileSource{Root: root})
	}
	os.Exit(m.Run())
}

// TestStorage runs the specs through upstream's entry point: its ginkgo
// configuration, reporters and suite setup (orphaned namespaces deleted,
// nodes schedulable, kube-system pods ready) are e2e.test's.
func TestStorage(t *testing.T) { e2e.RunE2ETests(t) }
