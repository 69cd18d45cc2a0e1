#!/usr/bin/env bash
# Kubernetes' own storage e2e suite (e2e.test, ginkgo focus External.Storage)
# against an example driver, on this one machine: the kubelet mode of
# sanity/kube (API server, controller manager, scheduler, kubelet,
# containerd), the driver deployed with its deploy/ manifests, the
# test-driver file derived from the running driver's capabilities (csikit
# testdriver), the suite's test images built here (no registry).
#
#   sanity/kube/e2e/run.sh hostpath [directory|ext4|xfs|block]
#   sanity/kube/e2e/run.sh rbd
#
# rbd runs ext4 and block volumes in one run, with rbd-fuse and a loop
# device as the node's mapper, against the Ceph cluster of the
# CSIKIT_CEPH_* variables (examples/rbd/test/cluster.sh's env file; its
# monitor must be on an address pods reach, not loopback) or, without
# them, a throwaway cluster started on the host's address and stopped at
# the end (needs the Ceph packages of examples/rbd/test/ci.sh).
#
# FOCUS=ci runs the subset CI runs (.ci/run for hostpath's ext4 kind,
# examples/rbd/test/ci.sh for rbd): provisioning (snapshot restore, clone),
# snapshots, volume expansion (controller and node, file system and block),
# volumeMode, volumes, subPath and fsGroup, each in the test patterns that
# exercise it once (dynamic default fs, block and filesystem volmode,
# allowExpansion, delete-policy snapshots), without the [Slow] specs (their
# longer variants of the same checks): 37 specs for rbd where the same
# suites in every pattern are 68.
# FOCUS='provisioning|snapshottable' narrows the run (a regular expression
# over the spec names, after External.Storage), SKIP adds to the skipped
# specs ([Serial], [Disruptive], [Alpha] and features other than snapshots
# and xfs always: kube.DefaultE2ESkip, DefaultE2ELabelFilter), PROCS runs specs
# in that many processes (default 2), OUT keeps the JUnit file, the logs,
# the StorageClass and test-driver.yaml (default: a new temporary
# directory). Needs root, go, runc, containernetworking-plugins,
# busybox-static and iptables (sanity/kube/ci.sh installs them). Ends with
# "N passed, N failed, N skipped" and exits non-zero on a failure.
# CSIKIT_KUBE_TEST_EXEC, when set, runs the test binary through that
# program (go test -exec; .ci/run: .ci/nothp).
set -euo pipefail
cd "$(dirname "$0")/.."
driver=${1:?usage: $0 hostpath|rbd [KIND]}
kind=${2:-ext4}
if [ "${FOCUS:-}" = ci ]; then
	FOCUS='\[Testpattern: (Dynamic PV \((default fs|block volmode|filesystem volmode)\)(\(allowExpansion\))?|Dynamic Snapshot \(delete policy\))\] (provisioning|snapshottable|volume-expand|volumeMode|volumes|subPath|fsgroupchangepolicy) '
	SKIP='\[Slow\]|\(block volmode\)\] provisioning '"${SKIP:+|$SKIP}"
fi
export PATH="$PATH:/usr/local/go/bin"
out=${OUT:-$(mktemp -d /tmp/csikit-e2e-XXXXXX)}
mkdir -p "$out"
start=$(date +%s)
go run ./internal/buildtools -runtime -e2e
echo "e2e: binaries ready in $(( $(date +%s) - start ))s"
case "$driver" in
hostpath)
	CSIKIT_KUBE_KUBELET=1 CSIKIT_KUBE_E2E=hostpath CSIKIT_KUBE_E2E_KIND="$kind" \
		CSIKIT_KUBE_E2E_FOCUS="${FOCUS:-}" CSIKIT_KUBE_E2E_SKIP="${SKIP:-}" \
		CSIKIT_KUBE_E2E_PROCS="${PROCS:-2}" CSIKIT_KUBE_E2E_DIR="$out" \
		go test ${CSIKIT_KUBE_TEST_EXEC:+-exec "$CSIKIT_KUBE_TEST_EXEC"} -count=1 -timeout 4h -run '^TestE2E$' -v . 2>&1 | tee "$out/test.log" |
		grep -E '^(=== RUN|--- |e2e |ok|FAIL|PASS)|skipped: |skipped by name: |failed: |test-driver.yaml|Summarizing|\[FAIL\]' || true
	;;
rbd)
	# examples/rbd (ext4 and block volumes in one run) against the Ceph
	# cluster of CSIKIT_CEPH_* (examples/rbd/test/cluster.sh's env file,
	# bound to an address pods reach), or a throwaway one started here
	# on the host's address and stopped on exit.
	rbd=$(cd ../../examples/rbd && pwd)
	if [ -z "${CSIKIT_CEPH_MON:-}" ]; then
		ceph="$out/ceph"
		trap '"$rbd/test/cluster.sh" stop "$ceph" || true' EXIT
		addr=$(ip -4 route get 203.0.113.1 | sed -n 's/.* src \([0-9.]*\).*/\1/p')
		set -a; . "$(CSIKIT_CEPH_ADDR=$addr "$rbd/test/cluster.sh" start "$ceph")"; set +a
		echo "e2e: Ceph cluster on $CSIKIT_CEPH_MON in $ceph ($(( $(date +%s) - start ))s)"
	fi
	(cd "$rbd" && CSIKIT_KUBE_E2E=rbd \
		CSIKIT_KUBE_E2E_FOCUS="${FOCUS:-}" CSIKIT_KUBE_E2E_SKIP="${SKIP:-}" \
		CSIKIT_KUBE_E2E_PROCS="${PROCS:-2}" CSIKIT_KUBE_E2E_DIR="$out" \
		go test ${CSIKIT_KUBE_TEST_EXEC:+-exec "$CSIKIT_KUBE_TEST_EXEC"} -tags pacific -count=1 -timeout 4h -run '^TestE2E$' -v ./test/kube 2>&1) | tee "$out/test.log" |
		grep -E '^(=== RUN|--- |e2e |ok|FAIL|PASS)|skipped: |skipped by name: |failed: |replaced |test-driver.yaml|Summarizing|\[FAIL\]' || true
	;;
*)
	echo "e2e: unknown driver $driver (hostpath, rbd)" >&2
	exit 2
	;;
esac
echo "e2e: JUnit $out/junit.xml, logs in $out; $(( $(date +%s) - start ))s in all"
if ! grep -q '^--- PASS: TestE2E' "$out/test.log"; then
	# The filter above keeps the suite's lines; a failure outside the
	# suite (the environment's start or cleanup) is in the test's own log
	# lines: show the last of them, without the skip list.
	echo "e2e: TestE2E failed; the test's last log lines (all in $out/test.log):"
	grep -E '^    [A-Za-z0-9_]+\.go:[0-9]+: ' "$out/test.log" | grep -vE 'skipped( by name)?: ' | tail -n 40
	exit 1
fi
