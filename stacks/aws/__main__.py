"""Entry point for a plain `pulumi up`: everything comes from the stack config that `clusterctl render` wrote.

    clusterctl render cluster.yaml --dir build && cp build/pulumi/Pulumi.<cluster>.yaml stacks/aws/
    cd stacks/aws && pulumi stack init <cluster>
    pulumi config set clusterctl:cluster_id "$(cat ~/.local/state/clusterctl/<cluster>/secrets/cluster-id)"
    base64 -w0 munge.key | pulumi config set --secret clusterctl:munge_key_b64   # from stdin, never argv
    pulumi up

(README.md has the details.)
"""

from clusterctl.engines.aws.program import program_from_config

program_from_config()
