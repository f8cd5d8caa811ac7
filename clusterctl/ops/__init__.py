"""Applying a spec to real machines: `up`, `down`, `status`."""
