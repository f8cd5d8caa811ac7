#!/bin/bash
# Let Debian's real slurmd parse a rendered gres.conf for one node (`slurmd -G`: print the node's GRES and exit),
# with that node's GPU device files faked in a private /dev (slurmd stats every File= entry).
# Usage (as root): unshare --uts --mount --fork bash slurmd_gres_check.sh SLURM_CONF NODE GPU_COUNT
set -euo pipefail
conf=$1 node=$2 gpus=$3
hostname "$node"
mount -t tmpfs tmpfs /dev
mknod -m 666 /dev/null c 1 3
for ((i = 0; i < gpus; i++)); do mknod "/dev/nvidia$i" c 195 "$i"; done
slurmd -G -N "$node" -f "$conf" 2>&1
