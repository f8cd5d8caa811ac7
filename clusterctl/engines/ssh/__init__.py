"""How clusterctl reaches hosts over SSH: host-key policy and remote commands."""
