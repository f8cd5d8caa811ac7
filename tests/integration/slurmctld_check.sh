#!/bin/bash
# Start Debian's real slurmctld on a rendered slurm.conf inside throwaway namespaces (network: the controller's
# address on lo; UTS: its hostname; mount: private state, munge socket) and print what it parsed.
# Usage (as root): unshare --net --uts --mount --fork bash slurmctld_check.sh BUILD_DIR HOSTNAME ADDRESS
set -euo pipefail
build=$1 host=$2 addr=$3
ip link set lo up
ip addr add "$addr/32" dev lo
hostname "$host"
work=$(mktemp -d); chmod 755 "$work"
mkdir -p /run/munge "$work/state" "$work/log"
mount -t tmpfs tmpfs /run/munge
chown munge: /run/munge
chown slurm: "$work/state" "$work/log"
mount --bind "$work/state" /var/lib/slurm/slurmctld
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chown munge: "$work/munge.key"; chmod 400 "$work/munge.key"
runuser -u munge -- munged --key-file="$work/munge.key" --pid-file=/run/munge/munged.pid 2>/dev/null
export SLURM_CONF="$build/slurm/slurm.conf"
slurmctld -D -i -f "$SLURM_CONF" -L "$work/log/slurmctld.log" &
pid=$!
for _ in $(seq 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
echo "== nodes"; scontrol -o show nodes
echo "== partitions"; scontrol -o show partitions
echo "== topology"; scontrol show topology
echo "== log"; cat "$work/log/slurmctld.log"
kill "$pid"; wait "$pid" || true
