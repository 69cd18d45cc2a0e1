#!/usr/bin/env bash
# CI for examples/rbd (called by .ci/run): installs the Ceph packages,
# builds (or finds cached) sanity/kube's Kubernetes binaries, starts a
# throwaway cluster in a fresh directory, runs the module's vet, staticcheck
# and tests (with -race) and its benchmarks once each, upstream csi-sanity
# against the rbd binary (per volume kind: ext4, xfs, block), the
# sanity/kube scenarios against it and Kubernetes' storage e2e subset
# against deploy/ in the kubelet mode, and stops the cluster on every exit
# path. The VM lane (krbd, rbd-nbd) runs beside all the rest, from the
# start. Each step prints the time since the start.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
t0=$(date +%s)
step() { echo; echo "=== rbd: $* ($(( $(date +%s) - t0 ))s)"; }
# CSIKIT_RBD_TESTS_DONE names a file created once the tests and csi-sanity
# are done (or this script ends): .ci/run's kubelet-mode lane
# (.ci/kube-lane.sh) waits for it. Those tests must not share the host
# with a kubelet-mode environment: in a trial run beside one (2026-12-06,
# load ~15) TestSanityEndpoint's xfs run left a fenced rbd-fuse mounted,
# spinning, and hung in its cleanup until go test's timeout.
tests_done() { if [ -n "${CSIKIT_RBD_TESTS_DONE:-}" ]; then : >"$CSIKIT_RBD_TESTS_DONE"; fi; }

step "install Ceph packages"
# The kubelet mode's (runc, CNI plugins, busybox-static, iptables): the e2e
# step and test/kube's TestKubeNodeLoss may run before sanity/kube/ci.sh,
# which installs them too.
pkgs=(ceph-mon ceph-osd ceph-mgr ceph-common rbd-fuse rbd-nbd librbd-dev librados-dev xfsprogs
	runc containernetworking-plugins busybox-static iptables)
installed=$(dpkg-query -W -f='${db:Status-Status}\n' "${pkgs[@]}" 2>/dev/null | grep -cx installed || true)
if [ "$installed" -eq "${#pkgs[@]}" ]; then
	echo "already installed"
else
	for try in 1 2 3; do
		if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null; then
			break
		fi
		[ "$try" -eq 3 ] && { echo "rbd: apt-get install failed 3 times" >&2; exit 1; }
		sleep 5
	done
fi

dir=$(mktemp -d /tmp/csikit-ceph.XXXXXX)
vm_pid=
cleanup() {
	rc=$?
	if [ -n "$vm_pid" ]; then
		# A failed step: the VM lane (its own process group) stops too.
		kill -- -"$vm_pid" 2>/dev/null || true
		wait "$vm_pid" 2>/dev/null || true
	fi
	tests_done
	test/cluster.sh stop "$dir" || true
	if [ $rc -ne 0 ]; then
		echo "rbd: failed; cluster logs:" >&2
		tail -n 20 "$dir"/log/*.log >&2 2>/dev/null || true
	fi
	rm -rf "$dir"
	exit $rc
}
trap cleanup EXIT
# krbd and rbd-nbd need rbd and nbd modules this kernel lacks: the test
# runs itself in csitest/vmtest's VM (Debian's kernel, a cluster of its
# own on the guest's loopback). Without -race: under TCG it would double
# a run of many minutes, and the driver code is the one the tests below
# run with -race.
# CI runs each mapper's lifecycle (stage, publish, online grow, restart,
# unstage) per kind, the failed stage and 2 split-brain trials (35-80 s
# each under TCG; RBD_SPLITBRAIN_TRIALS=20 for the issue's bar); the
# sanity harness per mapper and kind takes 6-34 minutes each under TCG,
# by load (this machine's KVM does not boot the guest), which the
# 45-minute budget cannot hold, so it runs
# with RBD_VM_SANITY=1 (make test-rbd-vm), as does TestKernelMapperLatency
# (krbd, rbd-nbd and rbd-fuse stage/publish side by side in the guest).
vmrun='^TestKernelMappers$/^(krbd|rbd-nbd)$/^(lifecycle|failed_stage|encrypted|splitbrain)$'
if [ "${RBD_VM_SANITY:-}" = 1 ]; then vmrun='^TestKernelMapper(s|Latency)$'; fi
# The guest (one TCG vCPU, its own cluster; about 16 minutes of one core
# on a fresh 2-core machine) is the step's longest part: it starts first
# and runs beside all the steps below (the tests wait on the cluster, the
# scenarios and the e2e suite on pods and kubelet). Started after the
# tests instead, it outlasted all of them and CI waited for it at the end;
# started after vet and staticcheck (CI until 2026-12-06), it was still
# the step's long pole on a fresh machine. Its output is shown when it is
# waited for, at the end.
step "krbd and rbd-nbd in the VM lane, in the background (-run $vmrun)"
vm_out=$(mktemp /tmp/csikit-rbd-vm.XXXXXX)
setsid go test -tags pacific -count=1 -timeout 45m -v -run "$vmrun" . >"$vm_out" 2>&1 &
vm_pid=$!
vm_t=$(date +%s)
vm_wait() {
	local rc=0
	wait "$vm_pid" || rc=$?
	vm_pid=
	if [ "$rc" -ne 0 ]; then
		echo "rbd: the VM lane failed (exit $rc) after $(( $(date +%s) - vm_t ))s:"
		cat "$vm_out"; rm -f "$vm_out"
		return 1
	fi
	grep -E 'booted|latency:|split-brain:|sanity: [0-9]+ passed|^(ok|---)' "$vm_out" || true
	echo "rbd: VM lane done, $(( $(date +%s) - vm_t ))s after its start"
	rm -f "$vm_out"
}

step "vet, staticcheck (-tags pacific; staticcheck without test/kube)"
go vet -tags pacific ./...
# staticcheck leaves out test/kube (vetted above): its imports (sanity/kube,
# client-go, the Kubernetes API types) more than double the analysis, 215
# CPU-seconds without it and 452 with it on a fresh staticcheck cache,
# for a package of test scenarios; sanity/kube, which it drives, is vetted
# and not staticchecked either.
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -tags pacific $(go list -tags pacific ./... | grep -v '/test/kube$')

step "start the throwaway Ceph cluster"
for try in 1 2; do
	if env=$(test/cluster.sh start "$dir"); then break; fi
	[ "$try" -eq 2 ] && exit 1
	test/cluster.sh stop "$dir" || true
	rm -rf "$dir"; dir=$(mktemp -d /tmp/csikit-ceph.XXXXXX)
done
set -a; . "$env"; set +a

step "tests (-race) and each benchmark once against the cluster"
# One package at a time (-p 1): the packages share the cluster's pool, and
# the sanity harness (TestSanity, examples/rbd) fails a case for any image
# that appears in the pool while it runs (Config.BackendObjects), such as
# one that driver/'s tests, run beside it, create meanwhile.
# Each benchmark runs once too (-bench . -benchtime 1x), in the same test
# binaries after their tests, so none rots without a second compile.
go test -p 1 -tags pacific -race -count=1 -timeout 15m -bench . -benchtime 1x -skip '^TestKernelMapper(s|Latency)$' $(go list -tags pacific ./... | grep -v '/test/kube$')

# Before the kubelet mode's steps: it needs only the cluster, and in
# .ci/run the kubelet-mode lane starts after it (tests_done), so the steps
# below wait for sanity/kube's host-wide lock while that lane holds it.
step "upstream csi-sanity v5.6.0 (ext4, xfs, block) and csikit sanity (mount, block) against the rbd binary"
test/csi-sanity.sh "$env"
tests_done

# Just before the step that needs them, outside any go test timeout: in
# .ci/run they have been building in the background since its start (at
# the lowest priority, beside the steps above; a cold build is tens of
# CPU-minutes), and this waits for that build (sanity/kube's build lock)
# or, alone, builds them. .ci/kube-lane.sh waits for the same build.
step "Kubernetes binaries and containerd for test/kube (sanity/kube's tool blocks)"
(cd ../../sanity/kube && go run ./internal/buildtools -runtime)

# Without -race: the driver under test is a separate process (the race
# detector would only watch the test's client-go calls), and a race build
# of client-go and the Kubernetes API types cost 14 minutes on the shared
# 2-core machine, where the plain build shares sanity/kube's compile cache.
# TestKubeNodeLoss runs two kubelets (CSIKIT_KUBE_KUBELET=1: the kubelet
# mode is opt-in), which takes sanity/kube's host-wide lock: in .ci/run it
# may first wait for .ci/kube-lane.sh's environments (about 10 minutes on
# a fresh machine), hence the timeout.
step "sanity/kube scenarios: the rbd binary under the real sidecars and two kubelets"
CSIKIT_KUBE_KUBELET=1 go test ${CSIKIT_KUBE_TEST_EXEC:+-exec "$CSIKIT_KUBE_TEST_EXEC"} -tags pacific -count=1 -timeout 30m -v ./test/kube

# Kubernetes' own storage e2e suite against deploy/ as shipped (node plugin
# with rbd-fuse and a loop device, the Deployment's sidecars) in
# sanity/kube's kubelet mode: the focused subset, ext4 and block volumes in
# one run. run.sh starts a throwaway cluster of its own on the host's
# address (the Deployment's pods cannot reach this one's loopback) and
# builds e2e.test from sanity/kube's tool block (shared with the hostpath
# run in .ci/kube-lane.sh). The full non-serial suite runs on demand:
# sanity/kube/e2e/run.sh rbd.
step "Kubernetes' storage e2e suite against deploy/: provisioning, snapshots, expansion, volumeMode, volumes, subPath, fsGroup"
t=$(date +%s)
env -u CSIKIT_CEPH_MON FOCUS=ci PROCS=3 \
	../../sanity/kube/e2e/run.sh rbd
echo "rbd: e2e focused subset in $(( $(date +%s) - t ))s"

step "the VM lane's results (krbd, rbd-nbd)"
vm_wait

step "done"
