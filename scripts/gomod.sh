#!/usr/bin/env bash
# Runs a go command that edits a nested module's requirements (default:
# go mod tidy) where the workspace cannot: go mod tidy and go get read the
# go.mod of the csikit version a nested module requires (v0.1.0, say) from
# a module proxy, and go.work's stand-in replace does not apply to them.
#
#   scripts/gomod.sh DIR [GO ARGS...]   e.g. scripts/gomod.sh sanity/kube get k8s.io/utils@latest
#
# It serves this work tree's released modules, at the version DIR requires,
# from a throwaway file:// proxy (tools/cmd/modproxy -worktree) and runs
# `go GO ARGS` in DIR with GOWORK=off GOFLAGS=-mod=mod
# GOPROXY=file://...,https://proxy.golang.org GONOSUMDB=github.com/csikit.
# Afterwards it drops the zip hashes of csikit modules from DIR/go.sum
# (they are the tree's, not the release's, and nothing needs them) and
# removes csikit's modules from the module cache, so that the tree's copy
# never stands in for a release there; the go.mod hashes stay (release.sh
# sums rewrites them at the next release).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$PATH:/usr/local/go/bin"
[ $# -ge 1 ] && [ -f "$root/$1/go.mod" ] && [ "$1" != . ] || { echo "usage: $0 NESTED_MODULE_DIR [go args...]" >&2; exit 2; }
dir=$1; shift
[ $# -gt 0 ] || set -- mod tidy
version=$(awk '$1 == "require" && $2 == "github.com/csikit/csikit" {print $3}
	$1 == "github.com/csikit/csikit" && $2 ~ /^v/ {print $2}' "$root/$dir/go.mod" | head -1)
[ -n "$version" ] || { echo "gomod: $dir/go.mod requires no github.com/csikit/csikit: run go directly" >&2; exit 2; }

tmp=$(mktemp -d /tmp/csikit-gomod.XXXXXX)
modcache=$(go env GOMODCACHE)
clean_cache() {
	for d in "$modcache/github.com/csikit" "$modcache/cache/download/github.com/csikit"; do
		if [ -e "$d" ]; then chmod -R u+w "$d" && rm -rf "$d"; fi
	done
}
trap 'clean_cache; rm -rf "$tmp"' EXIT
clean_cache
(cd "$root/tools" && GOWORK=off go run ./cmd/modproxy -worktree -repo "$root" -version "$version" -out "$tmp/proxy" >/dev/null)
(cd "$root/$dir" && GOWORK=off GOFLAGS=-mod=mod GONOSUMDB=github.com/csikit \
	GOPROXY="file://$tmp/proxy,https://proxy.golang.org" go "$@")
if [ -f "$root/$dir/go.sum" ]; then
	grep -Ev '^github\.com/csikit/[^ ]* v[^ /]* h1:' "$root/$dir/go.sum" >"$tmp/go.sum" || true
	cat "$tmp/go.sum" >"$root/$dir/go.sum"
fi
echo "gomod: ran go $* in $dir with the tree's csikit modules at $version"
