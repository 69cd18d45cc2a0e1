#!/usr/bin/env bash
# Proves from outside that every released module is consumable through a
# module proxy (CI runs it; needs root, git, go, and for examples/rbd's
# driver package cgo with librados-dev/librbd-dev, which examples/rbd's CI
# installs before this runs):
#
#  1. clones the repository (HEAD) to a temporary directory and releases it
#     there with scripts/release.sh prepare + tag at a CI-only version: the
#     next patch after CHANGELOG.md's latest release with "-ci.<unix time>"
#     (e.g. v0.1.1-ci.1796400000). The go command takes a module version
#     as immutable, and its build cache keeps an index of each version's
#     files: a second run with other contents under a reused version failed
#     to build from that stale index ("open .../deferred.go: no such file"),
#     so every run has a version of its own. A pre-release is never picked
#     by @latest, the clone
#     and its tags are thrown away, and nothing is pushed;
#  2. writes a file:// module proxy from those tags (tools/cmd/modproxy: the
#     .info, .mod and .zip files the go command fetches);
#  3. outside the tree, with GOWORK=off GOFLAGS=-mod=mod
#     GOPROXY=file://<proxy>,https://proxy.golang.org GONOSUMDB=github.com/csikit
#     (csikit's modules are checked against nothing but the vendor's own
#     go.sum; every other module still against the checksum database),
#     creates a vendor module that imports the root, sanity, sanity/kube and
#     examples/rbd/driver, with no replace directive, runs go mod tidy, builds,
#     vets, and runs the sanity harness by endpoint against examples/tmpfs
#     built from the module cache; checks that sanity/kube's tool block
#     resolves in the module cache, and gets the kubelet mode's container
#     runtime from sanity/kube/runtime there (built, or reused from the user
#     cache when sanity/kube's CI built the same go.mod and go.sum).
#
# csikit's modules are removed from the module cache before and after, so
# that a stale copy of the CI version can never stand in for the proxy's.
# Fails if any module cannot be resolved or anything does not build or pass.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$PATH:/usr/local/go/bin"
t0=$(date +%s)
say() { echo "proxy-proof: $* ($(( $(date +%s) - t0 ))s)"; }

last=$(sed -n 's/^## \[\([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\)\].*/\1/p' "$root/CHANGELOG.md" | head -1)
if [ -n "$last" ]; then
	IFS=. read -r major minor patch <<<"$last"
	version="v$major.$minor.$((patch + 1))-ci.$(date +%s)"
else
	version="v0.0.1-ci.$(date +%s)"
fi

tmp=$(mktemp -d /tmp/csikit-proxy-proof.XXXXXX)
modcache=$(go env GOMODCACHE)
clean_cache() {
	for d in "$modcache/github.com/csikit" "$modcache/cache/download/github.com/csikit"; do
		if [ -e "$d" ]; then chmod -R u+w "$d" && rm -rf "$d"; fi
	done
}
cleanup() {
	rc=$?
	clean_cache || true
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
clean_cache

say "release $version in a throwaway clone"
git clone -q "$root" "$tmp/repo"
export GIT_AUTHOR_NAME=csikit-ci GIT_AUTHOR_EMAIL=ci@csikit.invalid
export GIT_COMMITTER_NAME=csikit-ci GIT_COMMITTER_EMAIL=ci@csikit.invalid
(cd "$tmp/repo" && scripts/release.sh prepare "$version" >/dev/null && scripts/release.sh tag "$version")

say "file:// module proxy from the tags"
(cd "$root/tools" && GOWORK=off go run ./cmd/modproxy -repo "$tmp/repo" -version "$version" -out "$tmp/proxy")

say "a vendor's module outside the tree"
mkdir -p "$tmp/vendor"
cat >"$tmp/vendor/go.mod" <<MOD
module example.com/vendordriver

go 1.26.0
MOD
cat >"$tmp/vendor/vendor.go" <<'GO'
// Package vendordriver stands for a storage vendor's module: it uses every
// released csikit module's public packages.
package vendordriver

import (
	"github.com/csikit/csikit"
	rbd "github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/sanity"
	"github.com/csikit/csikit/sanity/kube"
)

var (
	_ = csikit.NewServer
	_ = sanity.Run
	_ kube.Options
	_ rbd.Options
)
GO
cat >"$tmp/vendor/sanity_test.go" <<'GO'
package vendordriver_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/sanity"
	"github.com/csikit/csikit/sanity/kube"
)

// TestKubeRuntimeFromModuleCache: the kubelet mode's container runtime is
// built from sanity/kube/runtime at sanity/kube's version, a module apart
// in the module cache (reused from the user cache when its go.mod and
// go.sum were built before, as sanity/kube's CI builds the same ones).
func TestKubeRuntimeFromModuleCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	dir, err := kube.EnsureRuntimeBinaries(ctx, kube.BuildOptions{Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if m := kube.MissingRuntimeBinaries(dir); len(m) > 0 {
		t.Fatalf("%s lacks %v", dir, m)
	}
	t.Logf("container runtime binaries in %s (%v)", dir, time.Since(start).Round(time.Second))
}

// TestSanityTmpfs runs the harness by endpoint against examples/tmpfs,
// built from the module cache.
func TestSanityTmpfs(t *testing.T) {
	bin := csitest.Build(t, "github.com/csikit/csikit/examples/tmpfs")
	state := t.TempDir()
	t.Cleanup(func() {
		entries, _ := os.ReadDir(filepath.Join(state, "volumes"))
		for _, e := range entries {
			_ = syscall.Unmount(filepath.Join(state, "volumes", e.Name()), syscall.MNT_DETACH)
		}
	})
	p := csitest.StartProcess(t, bin, "--nodeid", "vendor-node", "--state-dir", state)
	sanity.Run(t, sanity.Endpoint(p.Endpoint), sanity.Config{
		VolumeSize: 8 << 20, ExpandSize: 16 << 20, Restart: p.Restart, Log: p.Log,
	})
}
GO
cd "$tmp/vendor"
export GOWORK=off GOFLAGS=-mod=mod GONOSUMDB=github.com/csikit GOPRIVATE= GONOPROXY=
export GOPROXY="file://$tmp/proxy,https://proxy.golang.org"
for m in github.com/csikit/csikit github.com/csikit/csikit/sanity/kube github.com/csikit/csikit/examples/rbd; do
	go get "$m@$version"
done
go mod tidy
if grep -q '^replace\|^	github.com/csikit/.* =>' go.mod; then
	echo "proxy-proof: the vendor's go.mod needed a replace:"; cat go.mod; exit 1
fi
grep 'github.com/csikit/' go.mod
# sanity/kube builds the Kubernetes binaries of its tool block in its own
# directory, here the module cache, as the main module (its k8s.io replaces
# apply there): every package of that build must resolve, with go.sum as
# released (the cache is read-only).
say "sanity/kube's tool block resolves in the module cache"
kdir=$(go list -m -f '{{.Dir}}' github.com/csikit/csikit/sanity/kube)
tools=$(awk '/^tool \(/ {t = 1; next} t && /^\)/ {t = 0} t {print $1} $1 == "tool" && $2 != "(" {print $2}' "$kdir/go.mod")
(cd "$kdir" && GOFLAGS=-mod=readonly go list -deps $tools >/dev/null)
echo "sanity/kube@$version: $(echo $tools | wc -w) tools resolve in $kdir"

say "build and vet (-tags pacific: examples/rbd's driver package)"
go build -tags pacific ./...
go vet -tags pacific ./...
say "sanity by endpoint against examples/tmpfs, and sanity/kube's container runtime, from the module cache"
out=$(go test -tags pacific -count=1 -v -timeout 25m -run '^(TestSanityTmpfs|TestKubeRuntimeFromModuleCache)$' . 2>&1) || { echo "$out" | tail -60; exit 1; }
echo "$out" | grep -E 'sanity: [0-9]+ passed|runtime binaries in|^--- |^ok' || true
# A here-string, not echo piped into grep -q: grep -q exits at its first
# match, and with pipefail the echo it leaves writing into a closed pipe
# (the -v output is larger than the pipe's buffer) failed the check with
# SIGPIPE although the test had passed.
for t in TestSanityTmpfs TestKubeRuntimeFromModuleCache; do
	grep -q -- "--- PASS: $t" <<<"$out" || { echo "$out" | tail -60; echo "proxy-proof: $t did not pass"; exit 1; }
done
say "done: every released module resolved from the proxy at $version"
