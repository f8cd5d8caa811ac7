"""Ansible's speed settings: forks grow with the cluster, bounded by the cores of the machine running Ansible; Mitogen's
strategies unless switched off."""


from clusterctl.engines.ansible.settings import (
    FORKS_PER_CPU,
    MIN_FORKS,
    MITOGEN_SWITCH,
    SshOptions,
    ansible_env,
    forks_for,
    mitogen_strategy_dir,
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
    plugins = mitogen_strategy_dir()
    assert plugins is not None and (plugins / "mitogen_free.py").is_file() and (plugins / "mitogen_linear.py").is_file()
    assert ansible_env(3, SshOptions(), mitogen=plugins)["ANSIBLE_STRATEGY_PLUGINS"] == str(plugins)
    assert strategy_vars(plugins) == {"clusterctl_free_strategy": "mitogen_free", "clusterctl_linear_strategy": "mitogen_linear"}
    assert "ANSIBLE_STRATEGY_PLUGINS" not in ansible_env(3, SshOptions(), fast=False, mitogen=plugins)
    assert strategy_vars(None) == {"clusterctl_free_strategy": "free", "clusterctl_linear_strategy": "linear"}
    monkeypatch.setenv(MITOGEN_SWITCH, "0")
    assert mitogen_strategy_dir() is None
