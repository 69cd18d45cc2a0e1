#!/usr/bin/env bash
# Runs the project-quota tests (package quota, and the hostpath driver's
# directory-volume quota tests) on real xfs and ext4 project quotas, in a
# VM, for hosts whose kernel lacks them (built without CONFIG_XFS_QUOTA or
# CONFIG_QFMT_V2: there those tests skip). The VM boots Debian's kernel
# (package linux-image-amd64) under qemu (package qemu-system-x86) with the
# host's / mounted read-only over 9p, so the host's tools and the test
# binaries built here run unchanged; TMPDIR is a tmpfs in the VM.
#
#   examples/hostpath/test/quota-vm.sh              # quota tests
#   HP_RUN='Quota|Clone' examples/hostpath/test/quota-vm.sh
#
# Exits non-zero when a test fails; skips (exit 0) without root, qemu or a
# Debian kernel. Uses KVM when it works, else TCG (slower: a few minutes).
set -euo pipefail
cd "$(dirname "$0")/../../.."
if [ "$(id -u)" -ne 0 ]; then
	echo "quota-vm.sh: needs root; skipping" >&2
	exit 0
fi
kernel=$(ls /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -1 || true)
if ! command -v qemu-system-x86_64 >/dev/null || [ -z "$kernel" ] || ! command -v busybox >/dev/null; then
	echo "quota-vm.sh: needs qemu-system-x86, linux-image-amd64 and busybox-static; skipping" >&2
	# CI installs them: there a skip would hide untested quota code.
	if [ "${CI:-}" = true ] || { [ -n "${CSIKIT_STRICT_TESTS:-}" ] && [ "${CSIKIT_STRICT_TESTS}" != 0 ]; }; then exit 1; fi
	exit 0
fi
kver=${kernel#/boot/vmlinuz-}
work=$(mktemp -d /tmp/hp-quota-vm.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT

go test -c -o "$work/quota.test" ./quota/
go test -c -o "$work/hostpath.test" ./examples/hostpath/driver/

# What runs in the VM, in the host's root.
cat >"$work/inner.sh" <<EOF
#!/bin/bash
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /run/tmp && export TMPDIR=/run/tmp # the host's / is read-only here
for m in loop xfs ext4 quota_v2; do modprobe \$m; done
st=0
cd $PWD/quota && $work/quota.test -test.v -test.count=1 || st=1
cd $PWD/examples/hostpath/driver && $work/hostpath.test -test.v -test.count=1 -test.run '${HP_RUN:-Quota}' || st=1
echo "QUOTA-VM-STATUS=\$st"
EOF

# An initramfs that mounts the host's / over 9p and runs inner.sh there.
init="$work/initramfs"
mkdir -p "$init"/{bin,mods,proc,sys,dev,newroot}
cp "$(command -v busybox)" "$init/bin/busybox"
for m in virtio_pci 9pnet_virtio 9p; do modprobe -S "$kver" --show-depends "$m"; done |
	awk '$1 == "insmod" && !seen[$2]++ {print $2}' >"$init/mods/order"
while read -r f; do cp "$f" "$init/mods/"; done <"$init/mods/order"
cat >"$init/init" <<EOF
#!/bin/busybox sh
B=/bin/busybox
\$B mount -t proc proc /proc; \$B mount -t sysfs sys /sys; \$B mount -t devtmpfs dev /dev
while read -r f; do \$B insmod /mods/\$(\$B basename \$f); done </mods/order
\$B mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144 hostroot /newroot || \$B poweroff -f
\$B mount -t proc proc /newroot/proc; \$B mount -t sysfs sys /newroot/sys
\$B mount -t devtmpfs dev /newroot/dev; \$B mount -t tmpfs run /newroot/run
\$B chroot /newroot /bin/bash $work/inner.sh
\$B poweroff -f
EOF
chmod +x "$init/init"
(cd "$init" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz"

accel="-accel tcg,thread=multi -cpu max"
if [ -w /dev/kvm ] && timeout 20 qemu-system-x86_64 -enable-kvm -cpu host -display none -no-reboot \
	-kernel "$kernel" -append "panic=-1 console=ttyS0 init=/bin/false" -serial null 2>/dev/null; then
	accel="-enable-kvm -cpu host"
fi
out="$work/console.txt"
# shellcheck disable=SC2086
timeout 1800 qemu-system-x86_64 $accel -smp 2 -m 2048 -nographic -no-reboot \
	-kernel "$kernel" -initrd "$work/initrd.gz" \
	-append "console=ttyS0 quiet loglevel=3 panic=-1" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=passthrough,readonly=on,multidevs=remap \
	-serial mon:stdio -display none </dev/null 2>&1 | tr -d '\r' | tee "$out" | grep -v '^\[' || true
grep -q '^QUOTA-VM-STATUS=0' "$out"
