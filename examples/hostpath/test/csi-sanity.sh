#!/usr/bin/env bash
# Runs upstream csi-sanity v5.6.0 against the hostpath driver over a unix
# socket, in six configurations: default (directory volumes), ext4 and xfs
# volumes, block, attach with an attach limit, and modify; then against
# examples/tmpfs. Prints each
# configuration's pass/fail counts and exits non-zero on any failure.
# Needs root (real mounts).
set -euo pipefail
cd "$(dirname "$0")/../../.."
if [ "$(id -u)" -ne 0 ]; then
	# CI runs as root: there a missing root is a broken setup, not a skip.
	if [ "${CI:-}" = true ] || { [ -n "${CSIKIT_STRICT_TESTS:-}" ] && [ "${CSIKIT_STRICT_TESTS}" != 0 ] && [ "${CSIKIT_STRICT_TESTS}" != false ]; }; then
		echo "csi-sanity.sh: needs root (the driver mounts filesystems); CI=${CI:-} CSIKIT_STRICT_TESTS=${CSIKIT_STRICT_TESTS:-} forbid skipping" >&2
		exit 1
	fi
	echo "csi-sanity.sh: needs root (the driver mounts filesystems); skipping" >&2
	exit 0
fi
work=$(mktemp -d /tmp/hp-sanity.XXXXXX)
bin="$work/bin"
mkdir -p "$bin"
go build -o "$bin/hostpath" ./examples/hostpath
go build -o "$bin/tmpfs" ./examples/tmpfs
GOBIN="$bin" go install github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity@v5.6.0

pid=""
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	# Nothing may stay mounted below the work dir.
	if grep -q " $work" /proc/self/mountinfo; then
		echo "csi-sanity.sh: mounts left below $work:" >&2
		grep " $work" /proc/self/mountinfo >&2
		awk -v w="$work" '$5 ~ "^"w {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l || true
	fi
	if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

failed=0
summary=""
run() { # name, driver flags..., --, sanity flags...
	local name=$1; shift
	local dflags=() sflags=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do dflags+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	sflags=("$@")
	local dir="$work/$name"
	mkdir -p "$dir/state"
	"$bin/$drv" --endpoint "unix://$dir/csi.sock" --nodeid sanity-node --state-dir "$dir/state" \
		--log-level warn "${dflags[@]}" 2>"$dir/driver.log" &
	pid=$!
	for _ in $(seq 100); do [ -S "$dir/csi.sock" ] && break; sleep 0.1; done
	local out="$dir/sanity.out" rc=0
	"$bin/csi-sanity" --csi.endpoint "unix://$dir/csi.sock" \
		--csi.stagingdir "$dir/staging" --csi.mountdir "$dir/mount" \
		--ginkgo.timeout 10m --ginkgo.no-color "${sflags[@]}" >"$out" 2>&1 || rc=$?
	kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
	local line
	line=$(grep -E "^(Ran [0-9]+ of [0-9]+ Specs|(SUCCESS|FAIL)! -- [0-9]+ Passed \| [0-9]+ Failed)" "$out" | tr '\n' ' ' || true)
	summary+="$name: $line"$'\n'
	if [ $rc -ne 0 ]; then
		failed=1
		echo "=== csi-sanity $name FAILED (exit $rc)"; grep -E "^\s*\[FAIL\]|\[FAILED\]" "$out" | head -40 || true
		echo "--- driver log (tail)"; tail -30 "$dir/driver.log" || true
	fi
}

drv=hostpath
run directory --
# Every kind a StorageClass can select: a directory (no fsType, above), a
# filesystem of its own (ext4, xfs; mkfs.xfs needs 300 MiB), a block volume.
printf 'fsType: ext4\n' >"$work/ext4.yaml"
run ext4 -- --csi.testvolumeparameters="$work/ext4.yaml" --csi.testvolumesize=67108864 --csi.testvolumeexpandsize=134217728
printf 'fsType: xfs\n' >"$work/xfs.yaml"
run xfs -- --csi.testvolumeparameters="$work/xfs.yaml" --csi.testvolumesize=314572800 --csi.testvolumeexpandsize=419430400
run block -- --csi.testvolumeaccesstype=block
run attach --enable-attach --max-volumes-per-node 2 -- --csi.testnodevolumeattachlimit
printf 'iops: "3000"\nthroughput: "500"\n' >"$work/mutable.yaml"
run modify --enable-modify --mutable-parameters iops,throughput -- --csi.testvolumemutableparameters="$work/mutable.yaml"

# The mid-sized example: size-limited tmpfs volumes, controller and node.
drv=tmpfs
run tmpfs -- --csi.testvolumesize=16777216 --csi.testvolumeexpandsize=33554432

echo "csi-sanity v5.6.0 against examples/hostpath (directory, ext4, xfs, block, attach, modify) and examples/tmpfs:"
printf '%s' "$summary"
exit $failed
