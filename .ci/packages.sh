#!/usr/bin/env bash
# Installs, in one apt-get transaction, every Debian package that a later
# CI step installs for itself when missing: the VM lane's (qemu, Debian's
# kernel, busybox, cryptsetup), examples/rbd's (Ceph, rbd-fuse, the
# development headers), the kubelet mode's (runc, CNI plugins, iptables)
# and examples/python's (Debian's Python gRPC). .ci/run starts it in the
# background at its start, so that on a fresh machine the downloading and
# unpacking (about 6 minutes, most of it qemu and the kernel) overlaps the
# compile-bound steps instead of running between them. The steps keep their
# own checks (each script still runs alone, as the Makefile's targets do);
# after this they find everything installed. Quick when all is present.
set -euo pipefail
pkgs=(
	# VM lane (csitest/vmtest)
	qemu-system-x86 linux-image-amd64 busybox-static cryptsetup-bin
	# examples/rbd/test/ci.sh
	ceph-mon ceph-osd ceph-mgr ceph-common rbd-fuse rbd-nbd librbd-dev librados-dev xfsprogs
	# the kubelet mode (sanity/kube/ci.sh, examples/rbd's kube tests)
	runc containernetworking-plugins iptables
	# examples/python/ci.sh
	python3-grpcio python3-grpc-tools python3-protobuf
)
installed=$(dpkg-query -W -f='${db:Status-Status}\n' "${pkgs[@]}" 2>/dev/null | grep -cx installed || true)
if [ "$installed" -eq "${#pkgs[@]}" ]; then
	echo "packages: all ${#pkgs[@]} installed"
	exit 0
fi
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
for try in 1 2 3; do
	if apt-get update -qq && apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null; then
		echo "packages: installed in $(( $(date +%s) - start ))s"
		exit 0
	fi
	[ "$try" -eq 3 ] && { echo "packages: apt-get install failed 3 times" >&2; exit 1; }
	sleep 5
done
