#!/bin/sh
# Installed by clusterctl as Slurm's TaskProlog: lines "export NAME=value" printed here enter the task's
# environment. Values the user set in the job win (NCCL_* already present are left alone).
env_file=/etc/clusterctl/nccl.env
[ -r "$env_file" ] || exit 0
grep -E '^[A-Z_][A-Z0-9_]*=' "$env_file" | while IFS='=' read -r name value; do
    eval "already=\${$name+set}"
    [ "$already" = set ] || echo "export $name=$value"
done
