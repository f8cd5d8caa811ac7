"""Lab networking: one bridge per cluster (gateway address on it), one netns + veth per node, NAT to the world.

A bridge rather than routed /32s: nodes must talk to each other directly (slurmd<->slurmd, srun), and a bridge
makes the lab subnet an ordinary L2 segment like a real rack. Every object carries the cluster's tag (link alias,
iptables comment) so down() removes exactly this cluster's objects, including those of nodes since removed.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import shlex
import time
from pathlib import Path

from clusterctl.engines.local import names
from clusterctl.engines.local.errors import LabError
from clusterctl.engines.local.proc import ok, run

NETNS_DIR = Path("/run/netns")


def _ip_json(*args: str) -> list[dict]:
    out = run(["ip", "-j", *args], what="ip").stdout.strip()
    return json.loads(out) if out else []


def link_exists(name: str, netns: str | None = None) -> bool:
    return ok(["ip", *(["-n", netns] if netns else []), "link", "show", "dev", name])


def uplink_mtu() -> int:
    """MTU of the host's default-route interface: nodes must not send bigger frames than the host can forward
    (this sandbox's eth0 has 1400; a 1500-byte node MTU then depends on PMTU discovery surviving NAT)."""
    for route in _ip_json("-4", "route", "show", "default"):
        dev = route.get("dev")
        if dev:
            links = _ip_json("link", "show", "dev", dev)
            if links and links[0].get("mtu"):
                return min(1500, int(links[0]["mtu"]))
    return 1500


def check_subnet_free(subnet: str, bridge: str) -> None:
    """Refuse a subnet another host interface already uses: routing it to the lab would cut that network off."""
    net = ipaddress.IPv4Network(subnet)
    for route in _ip_json("-4", "route", "show", "table", "main"):
        dst = route.get("dst")
        if not dst or dst == "default" or route.get("dev") == bridge:
            continue
        try:
            other = ipaddress.IPv4Network(dst if "/" in dst else f"{dst}/32", strict=False)
        except ValueError:
            continue
        if other.overlaps(net):
            raise LabError(f"lab subnet {subnet} overlaps {dst} on host interface {route.get('dev')}; "
                           f"choose another subnet for this cluster")


def ensure_bridge(cluster: str, subnet: str, gateway: str, mtu: int) -> str:
    br = names.bridge(cluster)
    check_subnet_free(subnet, br)
    prefix = ipaddress.IPv4Network(subnet).prefixlen
    if not link_exists(br):
        run(["ip", "link", "add", br, "type", "bridge"], what=f"creating bridge {br} (kernel needs CONFIG_BRIDGE)")
    run(["ip", "link", "set", br, "alias", names.link_alias(cluster), "mtu", str(mtu)], what=f"configuring {br}")
    run(["ip", "addr", "replace", f"{gateway}/{prefix}", "dev", br], what=f"address on {br}")
    run(["ip", "link", "set", br, "up"], what=f"bringing up {br}")
    return br


def remove_bridge(cluster: str) -> None:
    br = names.bridge(cluster)
    if link_exists(br):
        run(["ip", "link", "del", br], what=f"deleting bridge {br}")


def ensure_node_net(cluster: str, node: str, address: str, prefix: int, gateway: str, mtu: int) -> str:
    """netns /run/netns/<name> with eth0=address, default route via the gateway; host end enslaved to the bridge."""
    ns = names.netns(cluster, node)
    veth = names.host_veth(cluster, node)
    br = names.bridge(cluster)
    if not (NETNS_DIR / ns).exists():
        run(["ip", "netns", "add", ns], what=f"creating netns {ns}")
    if not link_exists(names.NODE_IFNAME, ns):
        if link_exists(veth):  # half of a pair whose peer is gone (interrupted up): start over
            run(["ip", "link", "del", veth], what=f"deleting stale {veth}")
        run(["ip", "link", "add", veth, "mtu", str(mtu), "type", "veth", "peer", "name", names.NODE_IFNAME,
             "mtu", str(mtu), "netns", ns], what=f"creating veth for {node} (kernel needs CONFIG_VETH)")
    run(["ip", "link", "set", veth, "alias", names.link_alias(cluster, node), "master", br, "mtu", str(mtu), "up"],
        what=f"attaching {veth} to {br}")
    run(["ip", "-n", ns, "link", "set", "lo", "up"], what=f"lo in {ns}")
    run(["ip", "-n", ns, "link", "set", names.NODE_IFNAME, "mtu", str(mtu), "up"], what=f"eth0 in {ns}")
    run(["ip", "-n", ns, "addr", "replace", f"{address}/{prefix}", "dev", names.NODE_IFNAME], what=f"address in {ns}")
    run(["ip", "-n", ns, "route", "replace", "default", "via", gateway], what=f"default route in {ns}")
    return ns


def remove_node_net(cluster: str, node: str) -> None:
    ns = names.netns(cluster, node)
    if (NETNS_DIR / ns).exists():
        run(["ip", "netns", "delete", ns], what=f"deleting netns {ns}")  # takes the veth pair with it...
    veth = names.host_veth(cluster, node)
    deadline = time.monotonic() + 10
    while link_exists(veth) and time.monotonic() < deadline:
        # ...but asynchronously (the kernel tears a netns down in a workqueue): wait, then delete it ourselves.
        time.sleep(0.1)
        if time.monotonic() > deadline - 8:
            run(["ip", "link", "del", veth], check=False)
    if link_exists(veth):
        raise LabError(f"could not delete {veth}, the host end of {node}'s veth pair")


def cluster_netns(cluster: str) -> list[str]:
    prefix = names.netns_prefix(cluster)
    return sorted(p.name for p in NETNS_DIR.glob(prefix + "*")) if NETNS_DIR.is_dir() else []


def cluster_links(cluster: str) -> list[str]:
    """Host links tagged for this cluster (bridge and veths), found by alias so renamed/removed nodes count too."""
    tag = names.link_alias(cluster)
    return [link["ifname"] for link in _ip_json("link", "show")
            if link.get("ifalias", "") == tag or link.get("ifalias", "").startswith(tag + "/")]


# --- NAT ---------------------------------------------------------------------------------------------

def _nat_rules(cluster: str, subnet: str) -> list[tuple[str, str, list[str]]]:
    br = names.bridge(cluster)
    tag = ["-m", "comment", "--comment", names.tag(cluster)]
    return [
        ("nat", "POSTROUTING", ["-s", subnet, "!", "-o", br, *tag, "-j", "MASQUERADE"]),
        # FORWARD may default to DROP (Docker sets that): let lab traffic out and replies back in.
        ("filter", "FORWARD", ["-i", br, *tag, "-j", "ACCEPT"]),
        ("filter", "FORWARD", ["-o", br, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", *tag, "-j", "ACCEPT"]),
    ]


def ensure_nat(cluster: str, subnet: str) -> None:
    for table, chain, rule in _nat_rules(cluster, subnet):
        if not ok(["iptables", "-w", "-t", table, "-C", chain, *rule]):
            run(["iptables", "-w", "-t", table, "-I", chain, "1", *rule], what=f"adding iptables {table}/{chain} rule")


def remove_nat(cluster: str) -> None:
    """Delete every rule carrying this cluster's comment, whatever subnet it was created with."""
    for table, chain in (("nat", "POSTROUTING"), ("filter", "FORWARD")):
        listing = run(["iptables", "-w", "-t", table, "-S", chain], check=False).stdout
        for line in listing.splitlines():
            words = shlex.split(line)
            if words[:1] == ["-A"] and _has_comment(words, names.tag(cluster)):
                run(["iptables", "-w", "-t", table, "-D", *words[1:]], what=f"removing iptables {table} rule")


def nat_rules_left(cluster: str) -> list[str]:
    left = []
    for table in ("nat", "filter"):
        for line in run(["iptables", "-w", "-t", table, "-S"], check=False).stdout.splitlines():
            if _has_comment(shlex.split(line), names.tag(cluster)):
                left.append(f"{table}: {line}")
    return left


def _has_comment(words: list[str], comment: str) -> bool:
    return any(a == "--comment" and b == comment for a, b in itertools.pairwise(words))
