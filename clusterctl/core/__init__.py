"""Shared vocabulary (errors, findings, hostlists, resource paths): imports nothing else of clusterctl."""
