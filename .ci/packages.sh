#!/usr/bin/env bash
# Installs every Debian package that a later CI step installs for itself
# when missing: the VM lane's (qemu, Debian's kernel, busybox, cryptsetup)
# and xfsprogs, which `make test` needs, first; then examples/rbd's (Ceph,
# rbd-fuse, the development headers), the kubelet mode's (runc, CNI
# plugins, iptables) and examples/python's (Debian's Python gRPC).
# .ci/run starts it in the background at its start, so that on a fresh
# machine the downloading and unpacking overlaps the compile-bound steps
# instead of running between them. Given a path ($1), it creates that file
# once the first group is installed: `make test` starts then, not after
# the whole install (542 s on a fresh machine, 2026-12-06, 217 s of it
# with make test waiting). The steps keep their own checks (each script
# still runs alone, as the Makefile's targets do); after this they find
# everything installed. Quick when all is present.
set -euo pipefail
early=(
	# make test: the VM lane (csitest/vmtest), mkfs.xfs
	qemu-system-x86 linux-image-amd64 busybox-static cryptsetup-bin xfsprogs
)
rest=(
	# examples/rbd/test/ci.sh
	ceph-mon ceph-osd ceph-mgr ceph-common rbd-fuse rbd-nbd librbd-dev librados-dev
	# the kubelet mode (sanity/kube/ci.sh, examples/rbd's kube tests)
	runc containernetworking-plugins iptables
	# examples/python/ci.sh
	python3-grpcio python3-grpc-tools python3-protobuf
)
marker=${1:-}
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
updated=
# install NAME PKG...: installs what of PKG is missing (apt-get update once,
# three tries).
install() {
	local what=$1; shift
	local installed
	installed=$(dpkg-query -W -f='${db:Status-Status}\n' "$@" 2>/dev/null | grep -cx installed || true)
	if [ "$installed" -eq "$#" ]; then
		echo "packages ($what): all $# installed"
		return 0
	fi
	for try in 1 2 3; do
		if { [ -n "$updated" ] || apt-get update -qq; } && updated=1 &&
			apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then
			echo "packages ($what): installed at $(( $(date +%s) - start ))s"
			return 0
		fi
		[ "$try" -eq 3 ] && { echo "packages ($what): apt-get install failed 3 times" >&2; exit 1; }
		sleep 5
	done
}
install "make test" "${early[@]}"
if [ -n "$marker" ]; then : >"$marker"; fi
install "the rest" "${rest[@]}"
