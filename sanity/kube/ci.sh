#!/usr/bin/env bash
# CI entry point for sanity/kube: builds (or reuses) the control-plane and
# sidecar binaries from this module's tool block and containerd from
# runtime/'s, installs the kubelet mode's Debian packages when missing, then
# runs the scenarios, the kubelet mode included (CSIKIT_KUBE_KUBELET=1).
# Exits non-zero on any failure. Needs: go; as root for the kubelet mode:
# runc, containernetworking-plugins, busybox-static, iptables (installed
# here when missing). Keys, certificates and images are generated in Go.
# CSIKIT_KUBE_TEST_EXEC, when set, runs the test binaries through that
# program (go test -exec; .ci/run: .ci/nothp, huge pages off for the
# kubelet mode's processes).
set -euo pipefail
cd "$(dirname "$0")"

start=$(date +%s)
if [ "$(id -u)" -eq 0 ]; then
	need=()
	command -v runc >/dev/null || need+=(runc)
	[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
	[ -x /bin/busybox ] || need+=(busybox-static)
	command -v iptables >/dev/null || need+=(iptables)
	if [ ${#need[@]} -gt 0 ]; then
		echo "sanity/kube: installing ${need[*]} (the kubelet mode)"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
		echo "sanity/kube: packages installed in $(( $(date +%s) - start ))s"
	fi
	export CSIKIT_KUBE_KUBELET=1
fi

# The tests build the binaries themselves when missing, but doing it here
# keeps the build out of go test's timeout and reports its duration.
t=$(date +%s)
go run ./internal/buildtools -runtime
echo "sanity/kube: binaries ready in $(( $(date +%s) - t ))s"

go vet ./...
# -v, filtered to each test's result and duration (the whole log is shown
# on a failure): where the step's time goes, run by run.
log=$(mktemp)
rc=0
go test ${CSIKIT_KUBE_TEST_EXEC:+-exec "$CSIKIT_KUBE_TEST_EXEC"} -count=1 -timeout 25m -v ./... >"$log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
	cat "$log"; rm -f "$log"
	echo "sanity/kube: go test failed (exit $rc) after $(( $(date +%s) - start ))s"
	exit "$rc"
fi
grep -E '^(--- |ok|FAIL)' "$log" || true
rm -f "$log"
echo "sanity/kube: done in $(( $(date +%s) - start ))s"
