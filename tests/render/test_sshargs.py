import shlex

from clusterctl.compile.model import SshTarget
from clusterctl.render.sshargs import common_args_string, option_args


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


# --- the host key policy, as ssh itself resolves it (`ssh -G` prints the options it would use, connecting nowhere) ---

import subprocess  # noqa: E402

from clusterctl.engines.ssh import hostkeys  # noqa: E402
from clusterctl.engines.ansible.settings import SshOptions  # noqa: E402
from clusterctl.compile.model import Node  # noqa: E402
from clusterctl.engines.ssh.remote import Remote  # noqa: E402


def resolved(argv: list[str]) -> dict[str, str]:
    """What ssh would use for this command line: argv with -G inserted, the remote command dropped."""
    r = subprocess.run([argv[0], "-G", *argv[1:-1]], capture_output=True, text=True, check=True)
    return dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)


def options(tmp_path, recorded=()):
    known = tmp_path / "known_hosts"
    known.write_text("".join(f"{h} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDummy\n" for h in recorded))
    config = hostkeys.write_config(tmp_path / "ssh_config", known, [("10.1.0.1", 22), ("10.1.0.2", 22)])
    return SshOptions(known_hosts=known, config=config)


def node(address, **ssh):
    return Node("n1", "p", "onprem", "compute", address, ssh=SshTarget(**ssh))


def test_first_contact_accepts_new_into_the_clusters_known_hosts(tmp_path):
    opts = options(tmp_path)
    o = resolved(Remote(node("10.1.0.1"), opts).argv("true"))
    assert o["stricthostkeychecking"] == "accept-new" and o["userknownhostsfile"] == str(opts.known_hosts)


def test_a_recorded_host_is_checked_strictly(tmp_path):
    opts = options(tmp_path, recorded=["10.1.0.1"])
    assert resolved(Remote(node("10.1.0.1"), opts).argv("true"))["stricthostkeychecking"] == "true"
    assert resolved(Remote(node("10.1.0.2"), opts).argv("true"))["stricthostkeychecking"] == "accept-new"


def test_a_pinned_known_hosts_file_wins_from_the_start(tmp_path):
    opts = options(tmp_path)
    o = resolved(Remote(node("10.1.0.2", known_hosts_file="/pinned/kh"), opts).argv("true"))
    assert o["stricthostkeychecking"] == "true" and o["userknownhostsfile"] == "/pinned/kh"


def test_the_lab_never_accepts_on_first_use(tmp_path):
    known = tmp_path / "known_hosts"
    config = hostkeys.write_config(tmp_path / "ssh_config", known, [("10.1.0.1", 22)], tofu=False)
    o = resolved(Remote(node("10.1.0.1"), SshOptions(known_hosts=known, config=config)).argv("true"))
    assert o["stricthostkeychecking"] == "true"


def test_users_own_config_still_applies_but_not_ahead_of_ours(tmp_path):
    o = resolved(Remote(node("10.1.0.1"), options(tmp_path)).argv("true"))
    assert o["hashknownhosts"] == "no"  # Debian's /etc/ssh/ssh_config says yes; ours comes first
