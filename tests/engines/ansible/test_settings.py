"""Ansible's speed settings: forks grow with the cluster, bounded by the cores of the machine running Ansible; Mitogen's
strategies unless switched off."""

from pathlib import Path

from clusterctl.engines.ansible.settings import (
    FORKS_PER_CPU,
    MIN_FORKS,
    MITOGEN_SWITCH,
    SshOptions,
    ansible_env,
    forks_for,
    strategy_vars,
)


def test_forks_follow_the_host_count_past_the_old_cap_of_100():
    assert forks_for(3, cpus=2) == MIN_FORKS
    assert forks_for(64, cpus=2) == 64
    assert forks_for(1024, cpus=8) == 8 * FORKS_PER_CPU == 400
    assert forks_for(16384, cpus=64) == 64 * FORKS_PER_CPU


def test_fast_environment_uses_them():
    env = ansible_env(300, SshOptions())
    assert env["ANSIBLE_FORKS"] == str(forks_for(300))
    assert ansible_env(300, SshOptions(), fast=False)["ANSIBLE_FORKS"] == "5"


def test_mitogen_strategies_are_on_by_default_and_off_with_the_switch_or_the_slow_path(monkeypatch):
    monkeypatch.delenv(MITOGEN_SWITCH, raising=False)
    plugins = Path(ansible_env(3, SshOptions())["ANSIBLE_STRATEGY_PLUGINS"])
    assert (plugins / "mitogen_free.py").is_file() and (plugins / "mitogen_linear.py").is_file()
    assert strategy_vars() == {"clusterctl_free_strategy": "mitogen_free", "clusterctl_linear_strategy": "mitogen_linear"}
    assert "ANSIBLE_STRATEGY_PLUGINS" not in ansible_env(3, SshOptions(), fast=False)
    assert strategy_vars(fast=False) == {"clusterctl_free_strategy": "free", "clusterctl_linear_strategy": "linear"}
    monkeypatch.setenv(MITOGEN_SWITCH, "0")
    assert "ANSIBLE_STRATEGY_PLUGINS" not in ansible_env(3, SshOptions())
    assert strategy_vars()["clusterctl_free_strategy"] == "free"
