#!/usr/bin/env bash
# Starts and stops a throwaway single-node Ceph cluster (one ceph-mon, one
# memstore ceph-osd, one ceph-mgr) on 127.0.0.1 (or the address in
# CSIKIT_CEPH_ADDR: the host's, for clients in pods of their own network
# namespace, as sanity/kube/e2e/run.sh rbd starts it) in a directory of your
# choice, for the rbd example's tests and CI. Nothing is installed system-wide
# and nothing outside DIR is written; daemons are stopped by the PIDs this
# script recorded when it started them, never by name.
#
#   cluster.sh start DIR   start a cluster in DIR (must not hold one already),
#                          print the path of its env file on stdout
#   cluster.sh stop DIR    stop the daemons started in DIR (idempotent)
#   cluster.sh env DIR     print the env file of a running cluster
#
# The env file (DIR/env, mode 0600) holds what tests read:
#   CSIKIT_CEPH_CONF      a ceph.conf naming the monitor (no keys in it)
#   CSIKIT_CEPH_MON       the monitor address, host:port
#   CSIKIT_CEPH_KEYRING   client.admin's keyring (0600)
#   CSIKIT_CEPH_POOL      an rbd-initialized pool
#   CSIKIT_CEPH_USER      a restricted user for the driver (CSI secret userID)
#   CSIKIT_CEPH_KEY_FILE  that user's key alone (0600; CSI secret userKey)
# Use it with: set -a; . "$(cluster.sh env DIR)"; set +a
# Needs ceph-mon, ceph-osd, ceph-mgr, ceph-common (Debian: pacific 16.2).
# CSIKIT_CEPH_MGR=0: no ceph-mgr (see below).
set -euo pipefail

usage() { echo "usage: $0 start|stop|env DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$(realpath -m "$2")

# stop_pids kills every daemon whose PID this script recorded, waits for
# it to exit, and forgets it. A PID is only signalled if it still runs the
# binary we started (guards against PID reuse).
stop_pids() {
	local f pid exe
	shopt -s nullglob
	for f in "$dir"/pids/*.pid; do
		pid=$(cat "$f")
		exe=$(basename "$f" .pid); exe=${exe%%.*}
		if [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$exe .*$dir/ceph.conf"; then
			kill "$pid" 2>/dev/null || true
			for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
			if [ -d "/proc/$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
		fi
		rm -f "$f"
	done
}

case $cmd in
stop)
	[ -d "$dir" ] || exit 0
	stop_pids
	exit 0
	;;
env)
	[ -f "$dir/env" ] || { echo "cluster.sh: no cluster in $dir" >&2; exit 1; }
	echo "$dir/env"
	exit 0
	;;
start) ;;
*) usage ;;
esac

for b in ceph-mon ceph-osd ceph-mgr ceph ceph-authtool monmaptool rbd; do
	command -v "$b" >/dev/null || { echo "cluster.sh: $b not found (apt-get install ceph-mon ceph-osd ceph-mgr ceph-common)" >&2; exit 1; }
done
if [ -f "$dir/env" ] || compgen -G "$dir/pids/*.pid" >/dev/null; then
	echo "cluster.sh: $dir already holds a cluster; stop it first" >&2; exit 1
fi
mkdir -p "$dir"/{pids,log,run,mon,osd,mgr}
chmod 700 "$dir"
trap 'rc=$?; if [ $rc -ne 0 ]; then echo "cluster.sh: start failed; logs in $dir/log" >&2; tail -20 "$dir"/log/*.log >&2 2>/dev/null || true; stop_pids; fi' EXIT

# Free ports for the monitor: msgr v2 (what librados and rbd-fuse use) and
# v1, as production monitors bind both: the kernel's rbd client (krbd)
# speaks v1 unless mapped with ms_mode, which needs Linux 5.11.
addr=${CSIKIT_CEPH_ADDR:-127.0.0.1}
read -r port port1 < <(python3 -c 'import socket, sys
a=socket.socket(); a.bind((sys.argv[1],0)); b=socket.socket(); b.bind((sys.argv[1],0))
print(a.getsockname()[1], b.getsockname()[1])' "$addr")
fsid=$(python3 -c 'import uuid; print(uuid.uuid4())')
conf="$dir/ceph.conf"
cat >"$conf" <<CONF
[global]
fsid = $fsid
mon host = [v2:$addr:$port,v1:$addr:$port1]
public addr = $addr
mon initial members = a
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
rbd default clone format = 2
paxos propose interval = 0.1
run dir = $dir/run
log file = $dir/log/\$name.log
pid file =
keyring = $dir/\$name.keyring
mon data = $dir/mon/\$id
osd data = $dir/osd/\$id
mgr data = $dir/mgr/\$id
osd objectstore = memstore
memstore device bytes = 3221225472
osd max object name len = 256
osd max object namespace len = 64
[client]
admin socket =
log file =
CONF

ceph-authtool --create-keyring "$dir/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool --create-keyring "$dir/client.admin.keyring" --gen-key -n client.admin \
	--cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
ceph-authtool "$dir/mon.keyring" --import-keyring "$dir/client.admin.keyring" >/dev/null
monmaptool --create --fsid "$fsid" --addv a "[v2:$addr:$port,v1:$addr:$port1]" "$dir/monmap" >/dev/null
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/mon.keyring"

# start NAME BINARY ARGS...: run a daemon in the foreground of a background
# job (so $! is its PID) in a new session, detached from this shell.
start() {
	local name=$1; shift
	setsid "$@" -f -c "$conf" </dev/null >>"$dir/log/$name.out" 2>&1 &
	echo $! >"$dir/pids/$name.pid"
}
start ceph-mon.a ceph-mon -i a
export CEPH_CONF="$conf"
cephc() { timeout 60 ceph -c "$conf" -n client.admin -k "$dir/client.admin.keyring" "$@"; }
cephc -s --connect-timeout 30 >/dev/null

osd_uuid=$(python3 -c 'import uuid; print(uuid.uuid4())')
osd_id=$(cephc osd new "$osd_uuid")
mkdir -p "$dir/osd/$osd_id"
cephc auth get-or-create "osd.$osd_id" osd 'allow *' mon 'allow profile osd' mgr 'allow profile osd' -o "$dir/osd.$osd_id.keyring" >/dev/null 2>&1
ceph-osd -c "$conf" -i "$osd_id" --mkfs --osd-uuid "$osd_uuid" >>"$dir/log/osd-mkfs.out" 2>&1
start "ceph-osd.$osd_id" ceph-osd -i "$osd_id"

# CSIKIT_CEPH_MGR=0 leaves the mgr out: neither the driver nor the tests
# need it (it reports statistics and runs the orchestration modules), and
# under TCG its Python modules take a third of the guest's CPU (kernel_test.go's
# VM: ceph-mgr 72 CPU-s of ~195 in a 5-minute run).
if [ "${CSIKIT_CEPH_MGR:-1}" != 0 ]; then
	cephc auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' -o "$dir/mgr.x.keyring" >/dev/null 2>&1
	mkdir -p "$dir/mgr/x"
	start ceph-mgr.x ceph-mgr -i x
fi

pool=rbd
cephc osd pool create "$pool" 16 16 >/dev/null 2>&1
cephc osd pool set "$pool" size 1 --yes-i-really-mean-it >/dev/null 2>&1
# rbd pool init blocks until the OSD is up and the pool's PGs are active
# (peering needs no mgr; the mgr only reports statistics, later).
timeout 120 rbd -c "$conf" -n client.admin -k "$dir/client.admin.keyring" pool init "$pool"

user=tenant42
# profile rbd lets the driver blocklist a client (Fence); lifting a fence
# early (Unfence) needs blocklist rm too (README: Node loss and fencing).
key=$(cephc auth get-or-create-key "client.$user" mon 'profile rbd, allow command "osd blocklist" with blocklistop=rm' osd "profile rbd pool=$pool" mgr "profile rbd pool=$pool")
umask 077
printf '%s' "$key" >"$dir/$user.key"
cat >"$dir/env" <<ENV
CSIKIT_CEPH_CONF=$conf
CSIKIT_CEPH_MON=$addr:$port
CSIKIT_CEPH_KEYRING=$dir/client.admin.keyring
CSIKIT_CEPH_POOL=$pool
CSIKIT_CEPH_USER=$user
CSIKIT_CEPH_KEY_FILE=$dir/$user.key
ENV
trap - EXIT
echo "$dir/env"
