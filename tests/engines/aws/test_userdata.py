"""The rendered cloud-init user-data: valid for `cloud-init schema` (Debian package cloud-init), a bootstrap script
that parses, and no secret in it. Plus the rendered stack config's network decisions."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from clusterctl.render.stack_config import StackConfig
from clusterctl.render.userdata import render_user_data
from clusterctl.compile import compile_plan
from clusterctl.render import render_spec
from clusterctl.render.cloud import cloud_config, vpc_cidr
from clusterctl.validate import load_valid
from tests.conftest import example
from tests.helpers import edited, load_dict, plan_of

AWS_EXAMPLES = ["aws-p5-spot.yaml", "hybrid-burst.yaml"]
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB0testkey clusterctl-test"


def user_data_files():
    out = []
    for ex in AWS_EXAMPLES:
        plan, files = render_spec(load_valid(example(ex)))
        out += [pytest.param(v, id=f"{ex}:{k}") for k, v in files.items() if k.startswith("cloud-init/")]
        # What the launch templates carry also has the workstation's key: validate that variant too.
        cfg = StackConfig.from_plan(plan)
        out += [pytest.param(render_user_data(cfg, p.name, ssh_public_key=SSH_KEY), id=f"{ex}:{p.name}+key") for p in cfg.pools]
    return out


def test_build_has_user_data_per_pool_and_controller():
    _, files = render_spec(load_valid(example("aws-p5-spot.yaml")))
    assert {k for k in files if k.startswith("cloud-init/")} == {"cloud-init/pools/p5.yaml", "cloud-init/controller.yaml"}
    _, files = render_spec(load_valid(example("hybrid-burst.yaml")))
    assert {k for k in files if k.startswith("cloud-init/")} == {"cloud-init/pools/burst.yaml"}
    _, files = render_spec(load_valid(example("lab.yaml")))
    assert not any(k.startswith(("cloud-init/", "pulumi/")) for k in files)


@pytest.mark.parametrize("text", user_data_files())
def test_user_data_passes_cloud_init_schema(text, tmp_path):
    if shutil.which("cloud-init") is None:
        pytest.skip("the cloud-init binary is missing (apt-get install cloud-init); CI installs it")
    f = tmp_path / "user-data.yaml"
    f.write_text(text)
    r = subprocess.run(["cloud-init", "schema", "--config-file", str(f)], capture_output=True, text=True)
    assert r.returncode == 0 and "Valid cloud-config" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("text", user_data_files())
def test_bootstrap_script_parses_and_holds_no_secret(text, tmp_path):
    doc = yaml.safe_load(text)
    script = next(f["content"] for f in doc["write_files"] if f["path"] == "/usr/local/sbin/clusterctl-bootstrap")
    f = tmp_path / "bootstrap.sh"
    f.write_text(script)
    r = subprocess.run(["sh", "-n", str(f)], capture_output=True, text=True)  # dash: what /bin/sh is on Debian
    assert r.returncode == 0, r.stderr
    assert "--with-decryption" in script and "ssm get-parameter" in script
    assert not re.search(r"[A-Za-z0-9+/]{200,}", text)  # no key material inlined
    assert doc["runcmd"][-1] == ["/usr/local/sbin/clusterctl-bootstrap"]
    assert {"python3", "python3-apt", "munge", "awscli"} <= set(doc["packages"])
    assert doc["preserve_hostname"] is True and doc["ssh_pwauth"] is False


def test_controller_is_in_etc_hosts_of_the_nodes():
    plan = plan_of("aws-p5-spot.yaml")
    cfg = StackConfig.from_plan(plan)
    node = render_user_data(cfg, "p5")
    assert 'echo "10.240.240.10 p5spot-ctl # clusterctl" >> /etc/hosts' in node
    ctl = render_user_data(cfg, controller=True)
    assert "p5spot-ctl # clusterctl" not in ctl  # the controller adds itself through the generic line only
    assert SSH_KEY in render_user_data(cfg, "p5", ssh_public_key=SSH_KEY)


def test_vpc_range_avoids_addresses_the_cluster_already_uses():
    def edit(d):
        d["controller"]["address"] = "10.240.0.2"
        d["pools"][0]["hosts"][0]["addresses"] = "10.240.1.[11-18]"
    loaded = load_dict(edited("hybrid-burst.yaml", edit))
    assert loaded.ok, [f.message for f in loaded.errors]
    plan = compile_plan(loaded.spec)
    assert vpc_cidr(plan) == "10.241.0.0/16"
    net = cloud_config(plan)["clusterctl:network"]
    assert net["subnets"][0]["cidr"] == "10.241.0.0/20" and net["ssh_ingress_cidrs"] == ["10.241.0.0/16", "10.240.0.2/32"]


def test_reservation_markets_leave_placement_to_the_capacity():
    def edit(d):
        d["pools"][0].update(market="capacity-block", capacity_reservation_id="cr-0123456789abcdef0",
                             availability_zones=["us-east-1a"])
    loaded = load_dict(edited("aws-p5-spot.yaml", edit))
    pool = cloud_config(compile_plan(loaded.spec))["clusterctl:pools"][0]
    assert pool["placement_strategy"] is None
    pool = cloud_config(plan_of("aws-p5-spot.yaml"))["clusterctl:pools"][0]
    assert pool["placement_strategy"] == "cluster"


def test_validate_and_help_do_not_import_pulumi_or_boto3():
    code = (
        "import sys\n"
        "sys.argv = ['clusterctl', 'validate', %r]\n"
        "from clusterctl import cli\n"
        "import clusterctl.engines.aws, clusterctl.render.stack_config, clusterctl.engines.aws.launch, clusterctl.render.userdata\n"
        "import clusterctl.engines.aws.preflight, clusterctl.engines.aws.up, clusterctl.engines.aws.automation, clusterctl.engines.aws.progress\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'pulumi', 'pulumi_aws', 'boto3', 'botocore'})\n"
        "print('HEAVY', heavy)\n"
    ) % str(example("aws-p5-spot.yaml"))
    import sys

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in r.stdout, r.stdout + r.stderr


IMDS_RULE = "-d 169.254.169.254/32 -m owner ! --uid-owner 0 -j REJECT"


@pytest.mark.parametrize("text", user_data_files())
def test_imds_is_root_only_from_early_boot_and_after_reboot(text):
    doc = yaml.safe_load(text)
    assert "iptables" in doc["packages"]
    # earliest hook cloud-init has (before packages and write_files): the rule if the image has iptables
    first = doc["bootcmd"][0]
    assert first[:2] == ["sh", "-c"] and f"iptables -I OUTPUT 1 {IMDS_RULE}" in first[2]
    files = {f["path"]: f for f in doc["write_files"]}
    script = files["/usr/local/sbin/clusterctl-imds-firewall"]
    assert script["owner"] == "root:root" and f"iptables -C OUTPUT {IMDS_RULE}" in script["content"]
    unit = files["/etc/systemd/system/clusterctl-imds-firewall.service"]["content"]
    # every later boot: before the network is up
    for line in ("Before=network-pre.target", "ExecStart=/usr/local/sbin/clusterctl-imds-firewall", "WantedBy=sysinit.target"):
        assert line in unit.splitlines()
    # enabled (and applied) before the bootstrap fetches the munge key with the role's credentials
    assert doc["runcmd"][:2] == [["systemctl", "enable", "--now", "clusterctl-imds-firewall.service"],
                                 ["/usr/local/sbin/clusterctl-bootstrap"]]


def test_imds_firewall_script_inserts_the_rule_once(tmp_path):
    """The script with a recording `iptables` stand-in: -C fails the first time (rule absent), then succeeds."""
    cfg = StackConfig.from_plan(plan_of("aws-p5-spot.yaml"))
    doc = yaml.safe_load(render_user_data(cfg, "p5"))
    script = tmp_path / "fw"
    script.write_text(next(f["content"] for f in doc["write_files"] if f["path"].endswith("clusterctl-imds-firewall")))
    fake = tmp_path / "bin" / "iptables"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/calls\n'
                    f'[ "$1" = -C ] && grep -q -- "^-I OUTPUT 1 {IMDS_RULE}$" {tmp_path}/calls && exit 0\n'
                    '[ "$1" = -C ] && exit 1\nexit 0\n')
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin"}
    for _ in range(2):
        subprocess.run(["sh", str(script)], env=env, check=True)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == [f"-C OUTPUT {IMDS_RULE}", f"-I OUTPUT 1 {IMDS_RULE}", f"-C OUTPUT {IMDS_RULE}"]
