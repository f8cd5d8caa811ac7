"""The hostile-spec corpus: specs a pull request could carry to inject into Ansible, Slurm, fstab, /etc/hosts or a
shell, to break out of a path, or to exhaust the machine running clusterctl.

Each case is (id, spec text, what the error must name, schema): the dotted field path (or "line N" for parse-level
refusals), and whether the JSON Schema alone must reject it too (a single-field error).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

from tests.helpers import example_dict, to_yaml

JINJA = "{{ lookup('pipe', 'id > /tmp/clusterctl-pwned') }}"


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    names: str  # a field path like controller.ssh.user, or "line N" for a refusal before the schema
    schema: bool = True  # the JSON Schema rejects it too


def _edit(example: str, fn: Callable[[dict], None]) -> str:
    data = copy.deepcopy(example_dict(example))
    fn(data)
    return to_yaml(data)


def _set(example: str, path: str, value) -> str:
    """Set a dotted path (list indexes as numbers) in an example spec, creating mappings on the way."""
    def fn(data):
        node, keys = data, [int(k) if k.isdigit() else k for k in path.split(".")]
        for k in keys[:-1]:
            if isinstance(k, str) and k not in node:
                node[k] = {}
            node = node[k]
        node[keys[-1]] = value
    return _edit(example, fn)


ONPREM, HYBRID, AWS, LAB = "onprem-64xh100-ib.yaml", "hybrid-burst.yaml", "aws-p5-spot.yaml", "lab.yaml"

# (example, dotted path, value, the field path the error names)
FIELD_VALUES = [
    # Jinja in every free-text field: Ansible would run it on the machine running clusterctl.
    (ONPREM, "controller.ssh.user", "root" + JINJA, "controller.ssh.user"),
    (ONPREM, "pools.0.ssh.user", JINJA, "pools[0].ssh.user"),
    (ONPREM, "pools.0.ssh.jump_host", "ops@" + JINJA, "pools[0].ssh.jump_host"),
    (ONPREM, "pools.0.ssh.private_key_file", "/keys/" + JINJA, "pools[0].ssh.private_key_file"),
    (ONPREM, "pools.0.ssh.known_hosts_file", "/k/{{ x }}", "pools[0].ssh.known_hosts_file"),
    (ONPREM, "pools.0.hosts.0.names", "gpu{{ x }}[001-064]", "pools[0].hosts[0].names"),
    (ONPREM, "pools.0.hosts.0.addresses", JINJA, "pools[0].hosts[0].addresses"),
    (ONPREM, "controller.address", JINJA, "controller.address"),
    (ONPREM, "controller.hostname", "{{ x }}", "controller.hostname"),
    (ONPREM, "storage.shared.0.mgs_nids.0", JINJA + "@o2ib", "storage.shared[0].mgs_nids[0]"),
    (ONPREM, "storage.shared.0.lnet_networks", "o2ib0({{ x }})", "storage.shared[0].lnet_networks"),
    (ONPREM, "storage.shared.0.mount_options", "flock,{{ x }}", "storage.shared[0].mount_options"),
    (ONPREM, "storage.shared.0.fs_name", "{{x}}", "storage.shared[0].fs_name"),
    (ONPREM, "scheduler.slurm.accounting.storage_host", JINJA, "scheduler.slurm.accounting.storage_host"),
    (ONPREM, "nccl.extra_env.NCCL_DEBUG_SUBSYS", JINJA, "nccl.extra_env.NCCL_DEBUG_SUBSYS"),
    (ONPREM, "fabric.interface", "{{ x }}", "fabric.interface"),
    (ONPREM, "pools.0.features", ["{{ x }}"], "pools[0].features[0]"),
    (ONPREM, "scheduler.slurm.partitions.0.name", "{{ x }}", "scheduler.slurm.partitions[0].name"),
    (ONPREM, "scheduler.slurm.partitions.0.pools", ["{{ x }}"], "scheduler.slurm.partitions[0].pools[0]"),
    (ONPREM, "scheduler.slurm.partitions.0.max_time", "{{ x }}", "scheduler.slurm.partitions[0].max_time"),
    (ONPREM, "storage.checkpoints.path", "/lustre/{{ x }}", "storage.checkpoints.path"),
    (ONPREM, "storage.local_cache.devices", ["/dev/{{ x }}"], "storage.local_cache.devices"),
    (ONPREM, "storage.local_cache.mount_point", "/mnt/{{ x }}", "storage.local_cache.mount_point"),
    (ONPREM, "software.nvidia_driver", "{{ x }}", "software.nvidia_driver"),
    (ONPREM, "name", "{{ x }}", "name"),
    (ONPREM, "pools.0.name", "{{ x }}", "pools[0].name"),
    (ONPREM, "fabric.hcas", ["mlx5_0", "{{ x }}"], "fabric.hcas[1]"),
    (ONPREM, "fabric.hcas", ["mlx5_0\nNCCL_IB_HCA=evil"], "fabric.hcas[0]"),
    (ONPREM, "scheduler.slurm.accounts.0.name", "llm; sacctmgr -i delete user root", "scheduler.slurm.accounts[0].name"),
    (ONPREM, "scheduler.slurm.accounts.0.users", ["alice", "{{ x }}"], "scheduler.slurm.accounts[0].users[1]"),
    (LAB, "lab.users", ["alice", "{{ x }}"], "lab.users[1]"),
    (LAB, "lab.users", ["alice\nroot"], "lab.users[0]"),
    (HYBRID, "storage.shared.0.server", JINJA, "storage.shared[0].server"),
    (HYBRID, "storage.shared.0.options", "vers=4.2,{{ x }}", "storage.shared[0].options"),
    (HYBRID, "storage.shared.0.export", "/export/{{ x }}", "storage.shared[0].export"),
    (HYBRID, "storage.shared.0.mount_point", "/home/{{ x }}", "storage.shared[0].mount_point"),
    (HYBRID, "pools.1.availability_zones", ["us-west-2a", JINJA], "pools[1].availability_zones[1]"),
    (HYBRID, "pools.1.instance_type", "{{ x }}", "pools[1].instance_type"),
    (HYBRID, "pools.1.region", "{{ x }}", "pools[1].region"),
    (HYBRID, "scheduler.slurm.burst.targets.0.partition", "{{ x }}", "scheduler.slurm.burst.targets[0].partition"),
    (HYBRID, "storage.checkpoints.s3_prefix", "{{ x }}/", "storage.checkpoints.s3_prefix"),
    (HYBRID, "state.pulumi_backend", "s3://bucket/{{ x }}", "state.pulumi_backend"),
    (AWS, "storage.shared.0.s3_link", {"bucket": "data-bucket", "import_path": "{{ x }}"},
     "storage.shared[0].s3_link.import_path"),
    # Newlines: one more line in slurm.conf, /etc/hosts, fstab or an env file.
    (ONPREM, "scheduler.slurm.accounting.storage_host", "db\nAuthType=auth/none", "scheduler.slurm.accounting.storage_host"),
    (ONPREM, "scheduler.slurm.accounting.storage_host", "db\u2028AuthType=auth/none", "scheduler.slurm.accounting.storage_host"),
    (HYBRID, "storage.shared.0.server", "srv:/ /etc nfs defaults 0 0\nx", "storage.shared[0].server"),
    (ONPREM, "nccl.extra_env.NCCL_SOCKET_IFNAME", "eth0\nLD_PRELOAD=/tmp/x.so", "nccl.extra_env.NCCL_SOCKET_IFNAME"),
    (ONPREM, "controller.ssh.user", "ops\nProxyCommand=id", "controller.ssh.user"),
    (ONPREM, "pools.0.ssh.jump_host", "ops@bastion\n", "pools[0].ssh.jump_host"),
    (ONPREM, "storage.shared.0.mgs_nids.0", "10.0.0.1@o2ib\n/dev/sda /etc ext4", "storage.shared[0].mgs_nids[0]"),
    (ONPREM, "storage.shared.0.mount_options", "flock\n", "storage.shared[0].mount_options"),
    (ONPREM, "controller.address", "10.10.0.2\n10.0.0.9 evil", "controller.address"),
    (ONPREM, "controller.address", "10.10.0.2\x00", "controller.address"),
    # Shell metacharacters.
    (ONPREM, "nccl.extra_env.NCCL_X", "$(id)", "nccl.extra_env.NCCL_X"),
    (ONPREM, "nccl.extra_env.NCCL_X", "`id`", "nccl.extra_env.NCCL_X"),
    (ONPREM, "nccl.extra_env.NCCL_X", "a b; rm -rf /", "nccl.extra_env.NCCL_X"),
    (ONPREM, "controller.ssh.user", "root;id", "controller.ssh.user"),
    (ONPREM, "pools.0.ssh.jump_host", "ops@host;id", "pools[0].ssh.jump_host"),
    (ONPREM, "pools.0.ssh.private_key_file", "/tmp/k; id", "pools[0].ssh.private_key_file"),
    (HYBRID, "storage.shared.0.options", "vers=4.2|id", "storage.shared[0].options"),
    (ONPREM, "nccl.extra_env", {"LD_PRELOAD;id": "1"}, "nccl.extra_env.LD_PRELOAD;id"),
    # Host names that Slurm or DNS refuse.
    (ONPREM, "pools.0.hosts.0.names", "gpu node[001-064]", "pools[0].hosts[0].names"),
    (ONPREM, "pools.0.hosts.0.names", "GPU[001-064]", "pools[0].hosts[0].names"),
    (ONPREM, "pools.0.hosts.0.names", "gpu\t[001-064]", "pools[0].hosts[0].names"),
    (ONPREM, "pools.0.hosts.0", {"names": "gpu[01-02]", "address_map": {"Gpu01": "10.0.0.1", "gpu02": "10.0.0.2"}},
     "pools[0].hosts[0].address_map.Gpu01"),
    (ONPREM, "pools.0.hosts.0", {"names": "gpu[01-02]", "address_map": {"gpu01": "10.0.0.1\nNodeName=evil",
                                                                        "gpu02": "10.0.0.2"}},
     "pools[0].hosts[0].address_map.gpu01"),
    (ONPREM, "pools.0.hosts.0", {"names": "gpu[01-02]", "address_map": {"gpu01": JINJA, "gpu02": "10.0.0.2"}},
     "pools[0].hosts[0].address_map.gpu01"),
    (ONPREM, "controller.hostname", "Atlas-CTL", "controller.hostname"),
    # Path tricks.
    (ONPREM, "storage.shared.0.mount_point", "/mnt/../etc", "storage.shared[0].mount_point"),
    (ONPREM, "storage.shared.0.mount_point", "/etc", "storage.shared[0].mount_point"),
    (ONPREM, "storage.shared.0.mount_point", "/", "storage.shared[0].mount_point"),
    (ONPREM, "storage.local_cache.mount_point", "/usr/local", "storage.local_cache.mount_point"),
    (ONPREM, "pools.0.ssh.private_key_file", "../../etc/shadow", "pools[0].ssh.private_key_file"),
    (ONPREM, "storage.checkpoints.path", "/lustre/./../root", "storage.checkpoints.path"),
    (ONPREM, "storage.local_cache.devices", ["/dev/../etc/passwd"], "storage.local_cache.devices"),
    (HYBRID, "storage.shared.0.export", "export/home", "storage.shared[0].export"),
    # Sizes: one group over the cluster cap, a lab subnet that takes minutes, a static pool with no node.
    (AWS, "pools.0.count", 0, "pools[0].count"),
    # Types as the JSON Schema says: no quietly coerced strings.
    (LAB, "pools.0.count", "2", "pools[0].count"),
    (LAB, "scheduler.slurm.partitions.1.preemptible", "true", "scheduler.slurm.partitions[1].preemptible"),
    (LAB, "monitoring.enabled", "yes", "monitoring.enabled"),
    (LAB, "controller.ssh.user", "x" * 5000, "controller.ssh.user"),
]


def _many_groups() -> str:
    """153 host groups of 65,536 hosts each (10 million nodes), in a few kilobytes."""
    groups = [{"names": f"g{i}n[00000-65535]", "addresses": f"10.{i}.[0-255].[0-255]"} for i in range(153)]
    return _set(ONPREM, "pools.0.hosts", groups)


def _many_pools() -> str:
    """17 elastic pools of 4,096 each: within every pool's own bound, over the cluster's."""
    def fn(data):
        base = data["pools"][1]
        data["pools"] = data["pools"][:1] + [dict(copy.deepcopy(base), name=f"burst{i}", max=4096) for i in range(17)]
        data["scheduler"]["slurm"]["partitions"][2]["pools"] = [f"burst{i}" for i in range(17)]
        data["scheduler"]["slurm"]["burst"]["targets"][0]["pools"] = [f"burst{i}" for i in range(17)]
    return _edit(HYBRID, fn)


def _raw_cases() -> list[Case]:
    lab = to_yaml(example_dict(LAB))
    laughs = "".join(f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]\n" for i in range(1, 10))
    return [
        Case("alias-bomb", "l0: &l0 [lol]\n" + laughs + lab, "line 1", schema=False),
        Case("anchor-and-alias", lab.replace("pools:\n", "pools: &p\n", 1) + "x: *p\n", "line", schema=False),
        Case("deep-nesting", lab + "surprise: " + "[" * 3000 + "]" * 3000 + "\n", "line", schema=False),
        Case("deep-mappings", lab + "surprise:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 60)) + "  " * 60
             + "v: 1\n", "line", schema=False),
        Case("complex-key", "? - {a: 1}\n: 3\n" + lab, "line 1", schema=False),
        Case("python-tag", lab.replace("name: lab", "name: !!python/object/apply:os.system [id]"), "line", schema=False),
        Case("custom-tag", lab.replace("name: lab", "name: !vault lab"), "line", schema=False),
        Case("two-documents", lab + "---\n" + lab, "line", schema=False),
        Case("huge-integer", lab.replace("count: 2", "count: " + "9" * 6000), "line", schema=False),
        Case("long-scalar", lab.replace("name: lab", "name: " + "a" * 20000), "line", schema=False),
        Case("many-groups", _many_groups(), "pools", schema=False),
        Case("many-pools", _many_pools(), "pools", schema=False),
        # Sizes only a count can tell (the schema cannot): over the cap in one group, a lab subnet of minutes.
        Case("group-over-cap", _set(ONPREM, "pools.0.hosts.0", {"names": "n[1-65537]", "addresses": "10.1.[0-255].[0-255],10.2.0.1"}),
             "pools[0].hosts[0].names", schema=False),
        Case("group-of-billions", _set(ONPREM, "pools.0.hosts.0", {"names": "n[1-99999999999]", "addresses": "10.0.0.1"}),
             "pools[0].hosts[0].names", schema=False),
        Case("lab-subnet-slash-8", _set(LAB, "lab.subnet", "10.0.0.0/8"), "lab.subnet", schema=False),
        Case("not-a-mapping", "- just\n- a list\n", "line 1", schema=True),
        Case("duplicate-key", lab + "name: other\n", "line", schema=False),
    ]


def corpus() -> list[Case]:
    cases = [Case(f"{path}={value!r}"[:80], _set(example, path, value), names)
             for example, path, value, names in FIELD_VALUES]
    return cases + _raw_cases()


def big_file_text(megabytes: int) -> str:
    """A syntactically valid spec padded with a comment to the given size (the size bound must refuse it unread)."""
    lab = to_yaml(example_dict(LAB))
    return lab + "#" + "x" * (megabytes * 1024 * 1024) + "\n"
