#!/bin/sh
# Run the node health check in --dry-run against a machine's REAL nvidia-smi (no Slurm needed: it prints its verdict
# and changes nothing), and keep the raw outputs it judged as candidate fixtures. Usage: health_real_gpu.sh OUTDIR
# GPU count, PCIe gen and NVLink count expected are read from nvidia-smi itself unless EXPECTED_* are set.
set -u
out=${1:?usage: $0 OUTDIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
nvidia-smi -q > "$out/nvidia-smi-q.txt" 2>&1
nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER > "$out/nvidia-smi-q-d-page-retirement-row-remapper.txt" 2>&1
nvidia-smi nvlink -s > "$out/nvidia-smi-nvlink-s.txt" 2>&1
nvidia-smi --query-gpu=index,pci.bus_id,ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.volatile.total,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,temperature.gpu,clocks_event_reasons.active --format=csv > "$out/nvidia-smi-query-gpu.csv" 2>&1
(dmesg 2>&1 | grep -i 'NVRM' | tail -50) > "$out/dmesg-nvrm.txt"
ls /sys/class/infiniband > "$out/infiniband.txt" 2>&1
gpus=${EXPECTED_GPUS:-$(nvidia-smi -L | grep -c '^GPU ')}
links=${EXPECTED_NVLINKS:-$(awk '/^GPU 0:/{f=1;next} /^GPU /{f=0} f && /Link [0-9]+:/{n++} END{print n+0}' "$out/nvidia-smi-nvlink-s.txt")}
cat > "$out/health.conf" <<CONF
EXPECTED_GPUS=$gpus
GPU_SOURCE=nvidia-smi
PCIE_GEN=${EXPECTED_PCIE_GEN:-5}
PCIE_WIDTH=16
NVLINKS=$links
FABRIC_MANAGER=0
CONF
CLUSTERCTL_HEALTH_CONF="$out/health.conf" CLUSTERCTL_HEALTH_STATE="$out/state.json" \
    CLUSTERCTL_HEALTH_TEXTFILE="$out/clusterctl-health.prom" \
    python3 "$here/playbooks/roles/health/files/clusterctl-healthcheck" --dry-run > "$out/verdict.txt" 2>&1
echo "rc=$?" >> "$out/verdict.txt"
cat "$out/health.conf" "$out/verdict.txt"
