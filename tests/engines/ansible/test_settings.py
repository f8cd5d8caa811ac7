"""Ansible's speed settings: forks grow with the cluster, bounded by the cores of the machine running Ansible."""

from clusterctl.engines.ansible.settings import FORKS_PER_CPU, MIN_FORKS, SshOptions, ansible_env, forks_for


def test_forks_follow_the_host_count_past_the_old_cap_of_100():
    assert forks_for(3, cpus=2) == MIN_FORKS
    assert forks_for(64, cpus=2) == 64
    assert forks_for(1024, cpus=8) == 8 * FORKS_PER_CPU == 400
    assert forks_for(16384, cpus=64) == 64 * FORKS_PER_CPU


def test_fast_environment_uses_them(tmp_path):
    env = ansible_env(300, tmp_path / "facts", SshOptions())
    assert env["ANSIBLE_FORKS"] == str(forks_for(300))
    assert ansible_env(300, tmp_path / "facts", SshOptions(), fast=False)["ANSIBLE_FORKS"] == "5"
