#!/bin/sh
# clusterctl burst bootstrap: make this freshly launched instance Slurm node $NODE (run as root by the controller's
# `clusterctl burst bootstrap` over SSH; $1 is the unpacked kit: node.env, munge.key, the slurmd drop-in, pool files,
# the spot watcher). Configless: slurmd fetches the Slurm files from slurmctld (--conf-server in the drop-in). Idempotent: a repeated resume runs it again on the same instance.
set -eu
K=$1
. "$K/node.env"
say() { echo "bootstrap $NODE: $*"; }

# Identity: the node name as hostname (cloud-init's hostname is ip-a-b-c-d), itself and the controller in /etc/hosts.
hostname "$NODE" 2>/dev/null || true
echo "$NODE" > /etc/hostname
{ grep -v '# clusterctl-burst$' /etc/hosts || true
  echo "$ADDRESS $NODE # clusterctl-burst"
  [ -n "$CONTROLLER_ADDR" ] && echo "$CONTROLLER_ADDR $CONTROLLER # clusterctl-burst"
} > /etc/hosts.clusterctl-burst
cat /etc/hosts.clusterctl-burst > /etc/hosts   # in place: /etc/hosts may be a bind mount (containers)
rm -f /etc/hosts.clusterctl-burst

# Packages: a pre-converged image has them; a stock Debian image gets Debian's.
if ! command -v slurmd >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1 || ! command -v scontrol >/dev/null 2>&1; then
    say "installing slurmd, slurm-client, munge (not in the image)"
    export DEBIAN_FRONTEND=noninteractive
    # Stop the packages' own services from starting before their configuration is in place.
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    apt-get -q -o DPkg::Lock::Timeout=300 install -y --no-install-recommends slurmd slurm-client munge >/tmp/clusterctl-burst-apt.log 2>&1 || {
        apt-get -q -o DPkg::Lock::Timeout=300 update >>/tmp/clusterctl-burst-apt.log 2>&1
        apt-get -q -o DPkg::Lock::Timeout=300 install -y --no-install-recommends slurmd slurm-client munge >>/tmp/clusterctl-burst-apt.log 2>&1 || {
            tail -n 5 /tmp/clusterctl-burst-apt.log; exit 1; }
    }
    rm -f /usr/sbin/policy-rc.d
fi

# The cluster's munge key, and slurmd started configless: it fetches slurm.conf & co. from slurmctld. A local copy
# (an image baked from a converged node) would be read first by the node's client commands: removed.
install -o munge -g munge -m 0400 "$K/munge.key" /etc/munge/munge.key
install -d -m 0755 /etc/slurm /etc/clusterctl /var/log/clusterctl /etc/systemd/system/slurmd.service.d
rm -f /etc/slurm/slurm.conf /etc/slurm/gres.conf /etc/slurm/cgroup.conf /etc/slurm/topology.conf
install -m 0644 "$K/slurmd-configless.conf" /etc/systemd/system/slurmd.service.d/clusterctl-configless.conf
[ -f "$K/clusterctl-task-prolog" ] && install -m 0755 "$K/clusterctl-task-prolog" /etc/slurm/clusterctl-task-prolog
[ -f "$K/nccl.env" ] && install -m 0644 "$K/nccl.env" /etc/clusterctl/nccl.env
[ -f "$K/health.conf" ] && install -m 0644 "$K/health.conf" /etc/clusterctl/health.conf
[ -f "$K/clusterctl-healthcheck" ] && install -m 0755 "$K/clusterctl-healthcheck" /usr/local/sbin/clusterctl-healthcheck
printf 'SLURMD_OPTIONS="-N %s"\n' "$NODE" > /etc/default/slurmd

# The spot-interruption watcher (harmless on on-demand nodes: IMDS answers 404 forever).
install -m 0755 "$K/clusterctl-spot-watch" /usr/local/sbin/clusterctl-spot-watch
install -m 0644 "$K/clusterctl-spot-watch.service" /etc/systemd/system/clusterctl-spot-watch.service
printf 'NODE=%s\nIMDS_ENDPOINT=%s\nSPOT_SIGNAL=%s\nSPOT_GRACE=%s\n' "$NODE" "$IMDS_ENDPOINT" "$SPOT_SIGNAL" "$SPOT_GRACE" \
    > /etc/default/clusterctl-spot-watch

systemctl daemon-reload
systemctl enable -q munge slurmd clusterctl-spot-watch
systemctl restart munge
systemctl restart slurmd
systemctl restart clusterctl-spot-watch
say "munge, slurmd and the spot watcher running ($(slurmd -V 2>/dev/null || echo slurmd))"
