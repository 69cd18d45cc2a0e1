#!/usr/bin/env bash
# The kubelet mode's steps of .ci/run that need no Ceph: sanity/kube's
# tests (a real control plane, kubelet and containerd, the CSI sidecars,
# against examples/hostpath) and Kubernetes' storage e2e subset against
# examples/hostpath's ext4 kind. .ci/run runs them in the background
# beside examples/rbd's step and shows this log when it waits for them.
#
# Why beside: these steps wait on pods, kubelet and the API server, and
# leave most of the CPU idle (10-25% busy over sanity/kube's 470 s on a
# fresh 2-core machine, 2026-12-06). One kubelet-mode environment runs per
# host at a time (sanity/kube's host-wide lock): rbd's kubelet-mode
# scenarios and its e2e subset take turns with these at the lock.
#
# When CSIKIT_RBD_TESTS_DONE is set, the environments wait until that file
# exists: examples/rbd/test/ci.sh creates it once its tests and csi-sanity,
# which must not share the host with a kubelet-mode environment, are done
# (see there). The compiling (binaries, vet, the test binaries) goes
# first, beside them. Each part prints its duration. Run alone it is the
# same steps, one after the other.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
part_label="kube lane"
. .ci/part.sh
prepare() (
	cd sanity/kube
	go run ./internal/buildtools -runtime -e2e
	go vet ./...
	go test -count=1 -run '^$' ./... >/dev/null
)
wait_rbd() {
	[ -n "${CSIKIT_RBD_TESTS_DONE:-}" ] || return 0
	while [ ! -e "$CSIKIT_RBD_TESTS_DONE" ]; do sleep 2; done
}
part "the binaries, vet, the test binaries (sanity/kube)" prepare
part "wait for examples/rbd's tests and csi-sanity" wait_rbd
part "sanity/kube: a real control plane and the CSI sidecars against examples/hostpath" \
	sanity/kube/ci.sh
# The suite's focused subset for examples/hostpath's ext4 kind; the full
# non-serial suite and the other kinds run on demand
# (sanity/kube/e2e/run.sh hostpath directory|ext4|xfs|block).
part "Kubernetes' storage e2e suite (e2e.test) against examples/hostpath, ext4: provisioning, snapshots, expansion, volumeMode, volumes, subPath, fsGroup" \
	env FOCUS=ci PROCS=3 sanity/kube/e2e/run.sh hostpath ext4
