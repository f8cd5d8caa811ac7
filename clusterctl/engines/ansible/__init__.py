"""Ansible through ansible-runner: converge, check mode + diff, events to the progress view."""
