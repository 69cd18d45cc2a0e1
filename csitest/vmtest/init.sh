#!/bin/busybox sh
# The guest's /init (in the initramfs vmtest builds): mounts the host's root
# read-only over 9p, the writable scratch directory over it at the host's
# path, tmpfs on /run, and runs the agent (the host's binary, re-executed
# in the guest) in that root. When the agent exits, the guest powers off.
B=/bin/busybox
. /vmtest.conf
$B mount -t proc proc /proc
$B mount -t sysfs sys /sys
$B mount -t devtmpfs dev /dev
while read -r f; do $B insmod "/mods/$f" || echo "vmtest: insmod $f failed"; done </mods/order
R=/newroot
if ! $B mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose hostroot $R; then
	echo "vmtest: cannot mount the host's root"; $B poweroff -f
fi
$B mount -t proc proc $R/proc
$B mount -t sysfs sys $R/sys
$B mount -t devtmpfs dev $R/dev
$B mkdir -p $R/dev/pts $R/dev/shm
$B ln -sf /proc/self/fd $R/dev/fd # what udev would make (bash's <(...) needs it)
$B ln -sf /proc/self/fd/0 $R/dev/stdin
$B ln -sf /proc/self/fd/1 $R/dev/stdout
$B ln -sf /proc/self/fd/2 $R/dev/stderr
$B mount -t devpts devpts $R/dev/pts
$B mount -t tmpfs shm $R/dev/shm
$B mount -t tmpfs -o mode=755 run $R/run
$B mkdir -p $R/run/tmp && $B chmod 1777 $R/run/tmp
$B mount -t tmpfs -o mode=755 varrun $R/var/tmp 2>/dev/null
if ! $B mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 scratch "$R$SCRATCH"; then
	echo "vmtest: cannot mount the scratch directory"; $B poweroff -f
fi
$B mount -t cgroup2 cgroup2 $R/sys/fs/cgroup 2>/dev/null
$B ip link set lo up 2>/dev/null || $B ifconfig lo 127.0.0.1 up
$B hostname vmtest
# switch_root, not chroot: a chrooted process may not create user
# namespaces. PID 1 is then the host's sh, which powers off when the agent
# exits.
exec $B switch_root $R /bin/sh -c "/usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root TMPDIR=/run/tmp CSIKIT_VMTEST_AGENT=$PORT '$AGENT'; echo 'vmtest: agent exited'; sync; '$BUSYBOX' poweroff -f"
