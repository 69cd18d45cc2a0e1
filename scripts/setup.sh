#!/usr/bin/env bash
# Installs what csikit's tests need on a fresh Debian machine: filesystem
# tools for the real-mount tests. Idempotent and quick when all is present.
set -euo pipefail

need=()
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
command -v mkfs.xfs >/dev/null || need+=(xfsprogs)
command -v losetup >/dev/null || need+=(mount)
command -v blkid >/dev/null || need+=(util-linux)
[ -e /usr/bin/fusermount3 ] || [ -e /bin/fusermount3 ] || need+=(fuse3)

if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: missing ${need[*]}; run as root to install them (tests needing them will skip)" >&2
		exit 0
	fi
	echo "setup: installing ${need[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Loop devices for the block tests.
if [ "$(id -u)" -eq 0 ] && [ ! -e /dev/loop-control ]; then
	modprobe loop 2>/dev/null || true
fi
