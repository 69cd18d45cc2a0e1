#!/usr/bin/env bash
# Runs upstream csi-sanity v5.6.0, then the csikit command's sanity,
# against the built rbd driver binary over a
# unix socket, once per volume kind a StorageClass can select (ext4 mount
# volumes, the default; xfs mount volumes, parameter fsType: xfs; block
# volumes), against the cluster whose env file
# is given (examples/rbd/test/cluster.sh start DIR prints it). Uses the
# rbd-fuse mapper (CI kernels lack rbd and nbd). Prints each mode's
# pass/fail counts and exits non-zero on any failure. Needs root.
#
#   examples/rbd/test/csi-sanity.sh DIR/env
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 CLUSTER_ENV_FILE" >&2; exit 2; }
set -a; . "$1"; set +a
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
	echo "csi-sanity.sh: needs root (the driver maps images and mounts)" >&2
	exit 1
fi
export PATH="$PATH:/usr/local/go/bin"
work=$(mktemp -d /tmp/rbd-sanity.XXXXXX)
chmod 700 "$work"
bin="$work/bin"
mkdir -p "$bin"
go build -tags pacific -o "$bin/rbd" .
GOBIN="$bin" go install github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity@v5.6.0

pid=""
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	if grep -q " $work" /proc/self/mountinfo; then
		echo "csi-sanity.sh: mounts left below $work:" >&2
		grep " $work" /proc/self/mountinfo >&2
		awk -v w="$work" '$5 ~ "^"w {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l || true
	fi
	if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# The secrets file holds the key: root-only, inside the root-only work dir,
# removed with it.
umask 077
key=$(cat "$CSIKIT_CEPH_KEY_FILE")
{
	for s in CreateVolumeSecret DeleteVolumeSecret ControllerPublishVolumeSecret ControllerUnpublishVolumeSecret \
		ControllerValidateVolumeCapabilitiesSecret NodeStageVolumeSecret NodePublishVolumeSecret \
		CreateSnapshotSecret DeleteSnapshotSecret ControllerExpandVolumeSecret NodeExpandVolumeSecret \
		ListSnapshotsSecret; do
		printf '%s:\n  userID: "%s"\n  userKey: "%s"\n' "$s" "$CSIKIT_CEPH_USER" "$key"
	done
} >"$work/secrets.yaml"
# The standing credentials (--secrets-dir), as a mounted Secret holds
# them: the node plugin registers its ID with them at NodeGetInfo, and
# the controller (--require-node-registration) publishes to registered
# nodes only, so csi-sanity's publish to an unknown node is NOT_FOUND.
mkdir -p "$work/secret"
printf '%s' "$CSIKIT_CEPH_USER" >"$work/secret/userID"
printf '%s' "$key" >"$work/secret/userKey"
printf 'pool: "%s"\n' "$CSIKIT_CEPH_POOL" >"$work/params.yaml"
printf 'pool: "%s"\nfsType: xfs\n' "$CSIKIT_CEPH_POOL" >"$work/params-xfs.yaml"

failed=0
summary=""
run() { # name, parameters file, volume size in MiB, sanity flags...
	local name=$1 params=$2 size=$(($3 << 20)); shift 3
	local dir="$work/$name"
	mkdir -p "$dir/state"
	"$bin/rbd" --endpoint "unix://$dir/csi.sock" --nodeid sanity-node --monitors "$CSIKIT_CEPH_MON" \
		--pool "$CSIKIT_CEPH_POOL" --state-dir "$dir/state" --mapper rbd-fuse --log-level warn \
		--secrets-dir "$work/secret" --require-node-registration 2>"$dir/driver.log" &
	pid=$!
	for _ in $(seq 100); do [ -S "$dir/csi.sock" ] && break; sleep 0.1; done
	local out="$dir/sanity.out" rc=0
	"$bin/csi-sanity" --csi.endpoint "unix://$dir/csi.sock" \
		--csi.stagingdir "$dir/staging" --csi.mountdir "$dir/mount" \
		--csi.secrets "$work/secrets.yaml" --csi.testvolumeparameters "$params" \
		--csi.testvolumesize $size --csi.testvolumeexpandsize $((2 * size)) \
		--ginkgo.timeout 10m --ginkgo.no-color "$@" >"$out" 2>&1 || rc=$?
	kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
	local line
	line=$(grep -E "^(Ran [0-9]+ of [0-9]+ Specs|(SUCCESS|FAIL)! -- [0-9]+ Passed \| [0-9]+ Failed)" "$out" | tr '\n' ' ' || true)
	summary+="$name: $line"$'\n'
	if grep -q -- "$key" "$dir/driver.log"; then
		echo "=== csi-sanity $name: the key appears in the driver log"; failed=1
	fi
	if [ $rc -ne 0 ]; then
		failed=1
		echo "=== csi-sanity $name FAILED (exit $rc)"; grep -E "^\s*\[FAIL\]|\[FAILED\]" "$out" | head -40 || true
		echo "--- driver log (tail)"; tail -30 "$dir/driver.log" || true
	fi
}

run ext4 "$work/params.yaml" 16
# mkfs.xfs makes nothing smaller than 300 MiB; csi-sanity names no
# fs_type, so the class's fsType decides.
run xfs "$work/params-xfs.yaml" 320
run block "$work/params.yaml" 16 --csi.testvolumeaccesstype=block

# The same binary under csikit's own harness through the csikit command
# (issue 28: the command on a driver it does not serve in-process):
# mount (ext4) and block, the key in a root-only config file, the driver's
# log searched for it.
go build -o "$bin/csikit" ../../cmd/csikit
printf 'secrets:\n  userID: "%s"\n  userKey: "%s"\nparameters:\n  pool: "%s"\n' \
	"$CSIKIT_CEPH_USER" "$key" "$CSIKIT_CEPH_POOL" >"$work/csikit.yaml"
dir="$work/csikit"
mkdir -p "$dir/state"
"$bin/rbd" --endpoint "unix://$dir/csi.sock" --nodeid sanity-node --monitors "$CSIKIT_CEPH_MON" \
	--pool "$CSIKIT_CEPH_POOL" --state-dir "$dir/state" --mapper rbd-fuse --log-level debug \
	--secrets-dir "$work/secret" --require-node-registration 2>"$dir/driver.log" &
pid=$!
for _ in $(seq 100); do [ -S "$dir/csi.sock" ] && break; sleep 0.1; done
# Growing a mounted ext4 needs CAP_SYS_RESOURCE, which sandboxes (this CI's
# included) withhold: those two cases then skip, saying why; krbd's and
# rbd-nbd's online growth runs in the VM lane (TestKernelMappers).
grow=()
capeff=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
if (( (16#$capeff >> 24 & 1) == 0 )); then
	why="ext4 online growth needs CAP_SYS_RESOURCE, which this process lacks (run in the VM lane)"
	grow=(--skip-case "mount/Expansion/NodeExpandVolume/after_publish=$why" --skip-case "mount/DataPath/expansion_visible_on_node=$why")
fi
rc=0
"$bin/csikit" sanity --config "$work/csikit.yaml" --access-type both --volume-size 16Mi "${grow[@]}" \
	--driver-log "$dir/driver.log" --base-dir "$dir/paths" --quiet "$dir/csi.sock" >"$dir/sanity.out" 2>&1 || rc=$?
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
summary+="csikit sanity (mount ext4 and block): $(grep -E '^csikit sanity ' "$dir/sanity.out" || echo 'no tally')"$'\n'
if [ $rc -ne 0 ]; then
	failed=1
	echo "=== csikit sanity FAILED (exit $rc)"; tail -60 "$dir/sanity.out"
	echo "--- driver log (tail)"; tail -30 "$dir/driver.log" || true
fi

echo "csi-sanity v5.6.0 and csikit sanity against examples/rbd:"
printf '%s' "$summary"
exit $failed
