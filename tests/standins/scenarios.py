"""Scenarios the lab's stand-in nvidia-smi and dmesg replay (the scripts next to this module), built from the public
fixtures in tests/fixtures/health/ (SOURCES.md): an 8-GPU node is GPU 0's section of the real 535 `nvidia-smi -q` repeated
with bus ids 03..0a (derived: only the header and bus fields change), so GPU 3 sits at 0000:06:00, the bus of the
real XID 79 line. "xid79-gpu3" drops GPU 3 from nvidia-smi and puts that line in the kernel log."""

from __future__ import annotations

import re
from pathlib import Path

FIX = Path(__file__).parents[1] / "fixtures" / "health"
STANDINS = Path(__file__).parent
STATE = "/var/lib/clusterctl-standin"
BUSES = [f"{b:02x}" for b in range(3, 11)]


def _gpu0() -> tuple[str, str]:
    text = (FIX / "nvidia-smi-q.rtx4090-535.txt").read_text()
    head, rest = text.split("GPU 00000000:01:00.0\n", 1)
    return head, rest.split("\nGPU 00000000:23:00.0\n", 1)[0].rstrip("\n") + "\n"


def smi_q(buses: list[str]) -> str:
    head, section = _gpu0()
    head = re.sub(r"Attached GPUs +: \d+", f"Attached GPUs                             : {len(buses)}", head)
    out = [head.rstrip("\n")]
    for b in buses:
        s = section.replace("Bus                               : 0x01", f"Bus                               : 0x{b.upper()}")
        s = s.replace("Bus Id                            : 00000000:01:00.0", f"Bus Id                            : 00000000:{b.upper()}:00.0")
        out.append(f"GPU 00000000:{b.upper()}:00.0\n{s}")
    return "\n".join(out)


def smi_l(buses: list[str]) -> str:
    return "".join(f"GPU {i}: NVIDIA GeForce RTX 4090 (UUID: GPU-standin-{b})\n" for i, b in enumerate(buses))


def xid79_line() -> str:
    return next(line for line in (FIX / "xid-lines.txt").read_text().splitlines() if "): 79," in line)


def scenarios() -> dict[str, dict[str, str]]:
    gone = [b for b in BUSES if b != "06"]
    return {
        "healthy": {"q.txt": smi_q(BUSES), "L.txt": smi_l(BUSES), "dmesg.txt": ""},
        "xid79-gpu3": {"q.txt": smi_q(gone), "L.txt": smi_l(gone), "dmesg.txt": xid79_line() + "\n"},
    }


def install_script() -> str:
    """Shell that installs the stand-ins and both scenarios on a node, `healthy` current (root, POSIX sh)."""
    parts = ["set -e", f"mkdir -p {STATE} /etc/clusterctl-standin /opt/nccl-tests"]
    for name, files in scenarios().items():
        parts.append(f"mkdir -p {STATE}/{name}")
        for fname, text in files.items():
            parts.append(f"cat > {STATE}/{name}/{fname} <<'STANDIN_EOF'\n{text}STANDIN_EOF")
    for tool, dest in (("nvidia-smi", "/usr/local/bin/nvidia-smi"), ("dmesg", "/usr/local/bin/dmesg"),
                       ("all_reduce_perf", "/opt/nccl-tests/all_reduce_perf")):
        parts.append(f"cat > {dest} <<'STANDIN_EOF'\n{(STANDINS / tool).read_text()}STANDIN_EOF\nchmod 755 {dest}")
    parts.append(f"ln -sfn {STATE}/healthy {STATE}/current")
    return "\n".join(parts) + "\n"


def switch_script(scenario: str) -> str:
    return f"ln -sfn {STATE}/{scenario} {STATE}/current.new && mv -T {STATE}/current.new {STATE}/current"


REMOVE_SCRIPT = (f"rm -rf {STATE} /etc/clusterctl-standin /usr/local/bin/nvidia-smi /usr/local/bin/dmesg "
                 "/opt/nccl-tests /var/lib/clusterctl/health-state.json")
