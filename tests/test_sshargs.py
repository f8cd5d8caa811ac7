import shlex

from clusterctl.compile.model import SshTarget
from clusterctl.sshargs import common_args_string, option_args


def test_plain_jump_host_uses_proxyjump():
    assert option_args(SshTarget(jump_host="ops@bastion")) == ["-o", "ProxyJump=ops@bastion"]


def test_pinned_keys_go_through_the_jump_hop_too():
    t = SshTarget(user="ops", jump_host="ops@10.0.0.1:2222", private_key_file="/k", known_hosts_file="/kh")
    args = option_args(t)
    proxy = next(a for a in args if a.startswith("ProxyCommand="))
    hop = shlex.split(proxy.removeprefix("ProxyCommand="))
    assert hop[:3] == ["ssh", "-W", "%h:%p"]
    assert "UserKnownHostsFile=/kh" in hop and "/k" in hop and hop[-1] == "ops@10.0.0.1" and "2222" in hop
    assert ["-o", "UserKnownHostsFile=/kh"] == args[args.index("UserKnownHostsFile=/kh") - 1: args.index("UserKnownHostsFile=/kh") + 1]


def test_ansible_string_leaves_the_key_to_ansible():
    s = common_args_string(SshTarget(private_key_file="/k", known_hosts_file="/kh"))
    parts = shlex.split(s)
    assert "-i" not in parts and "UserKnownHostsFile=/kh" in parts
    assert common_args_string(SshTarget()) is None
