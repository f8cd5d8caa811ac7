import base64
import hashlib
import hmac

from clusterctl.engines.ssh import hostkeys

# OpenSSH 9.2's stderr when a recorded key changed (StrictHostKeyChecking yes or accept-new).
CHANGED = """@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!
Someone could be eavesdropping on you right now (man-in-the-middle attack)!
It is also possible that a host key has just been changed.
The fingerprint for the ED25519 key sent by the remote host is
SHA256:2cBFQ4u3lA0Xb5d7cRk0k7V8m6D1m8oQmXl2mYv4c2s.
Please contact your system administrator.
Add correct host key in /state/c/known_hosts to get rid of this message.
Offending ED25519 key in /state/c/known_hosts:3
Host key for 10.219.0.10 has changed and you have requested strict checking.
Host key verification failed.
"""
UNKNOWN = """No ED25519 host key is known for [10.0.0.9]:2222 and you have requested strict checking.
Host key verification failed.
"""


def test_changed_key_names_host_file_line_and_the_fix():
    msg = str(hostkeys.problem("own-ctl", "Failed to connect to the host via ssh: " + CHANGED))
    assert msg.startswith("own-ctl:") and "/state/c/known_hosts (line 3)" in msg
    assert "ssh-keygen -R 10.219.0.10 -f /state/c/known_hosts" in msg


def test_missing_from_a_pinned_file():
    msg = str(hostkeys.problem("own01", UNKNOWN, known_hosts="/pin/kh"))
    assert "no host key for [10.0.0.9]:2222 in /pin/kh" in msg and "known_hosts_file" in msg


def test_other_ssh_failures_are_not_host_key_problems():
    assert hostkeys.problem("own01", "ssh: connect to host 10.0.0.9 port 22: Connection refused") is None
    assert hostkeys.problem("own01", "Permission denied (publickey).") is None


def test_recorded_reads_plain_ported_and_hashed_names(tmp_path):
    salt = b"0123456789abcdefghij"
    hashed = "|1|" + base64.b64encode(salt).decode() + "|" + base64.b64encode(
        hmac.new(salt, b"10.0.0.3", hashlib.sha1).digest()).decode()
    kh = tmp_path / "kh"
    kh.write_text(f"# comment\nnode1,10.0.0.1 ssh-ed25519 AAAA\n[10.0.0.2]:2222 ssh-ed25519 AAAA\n{hashed} ssh-rsa AAAA\n"
                  "@revoked 10.0.0.4 ssh-ed25519 AAAA\n")
    names = ["10.0.0.1", "10.0.0.2", "[10.0.0.2]:2222", "10.0.0.3", "10.0.0.4", "10.0.0.5"]
    assert hostkeys.recorded(kh, names) == {"10.0.0.1", "[10.0.0.2]:2222", "10.0.0.3"}
    assert hostkeys.recorded(tmp_path / "none", names) == set()


def test_copy_without_drops_only_the_named_hosts_keys(tmp_path):
    """An image builder's known_hosts: the cluster's file less any key of the builder's address (plain, ported or
    hashed); other hosts' keys (the jump host), comments and markers stay; the source is untouched."""
    salt = b"0123456789abcdefghij"
    hashed = "|1|" + base64.b64encode(salt).decode() + "|" + base64.b64encode(
        hmac.new(salt, b"10.0.0.3", hashlib.sha1).digest()).decode()
    kh = tmp_path / "kh"
    text = (f"# comment\njump,203.0.113.7 ssh-ed25519 AAAA\nnode1,10.0.0.3 ssh-ed25519 AAAA\n{hashed} ssh-rsa AAAA\n"
            "[10.0.0.3]:2222 ssh-ed25519 AAAA\n@revoked 10.0.0.3 ssh-ed25519 AAAA\n")
    kh.write_text(text)
    out = hostkeys.copy_without(kh, tmp_path / "copy", ["10.0.0.3"])
    assert out.read_text() == ("# comment\njump,203.0.113.7 ssh-ed25519 AAAA\n[10.0.0.3]:2222 ssh-ed25519 AAAA\n"
                               "@revoked 10.0.0.3 ssh-ed25519 AAAA\n")
    assert hostkeys.recorded(out, ["203.0.113.7", "10.0.0.3"]) == {"203.0.113.7"} and kh.read_text() == text
    assert hostkeys.copy_without(None, tmp_path / "empty", ["10.0.0.3"]).read_text() == ""


def test_config_is_rewritten_only_when_it_changes(tmp_path):
    kh = tmp_path / "kh"
    cfg = hostkeys.write_config(tmp_path / "cfg", kh, [("10.0.0.1", 22)])
    first = cfg.stat().st_mtime_ns
    hostkeys.write_config(tmp_path / "cfg", kh, [("10.0.0.1", 22)])
    assert cfg.stat().st_mtime_ns == first and kh.exists()
    kh.write_text("10.0.0.1 ssh-ed25519 AAAA\n")
    assert "Host 10.0.0.1\n    StrictHostKeyChecking yes" in hostkeys.write_config(tmp_path / "cfg", kh, [("10.0.0.1", 22)]).read_text()
