#!/bin/sh
# Installed by clusterctl as Slurm's TaskProlog: lines "export NAME=value" printed here enter the task's
# environment. Values the user set in the job win (NCCL_* already present are left alone), except search paths
# (LD_LIBRARY_PATH): the rendered directories are PREPENDED to the job's own value, never replacing it.
env_file=/etc/clusterctl/nccl.env
[ -r "$env_file" ] || exit 0
grep -E '^[A-Z_][A-Z0-9_]*=' "$env_file" | while IFS='=' read -r name value; do
    eval "current=\${$name-}"
    eval "already=\${$name+set}"
    case "$name" in
        LD_LIBRARY_PATH)
            case ":$current:" in
                *":$value:"*) ;;  # already there (a nested step): nothing to add
                *) echo "export $name=$value${current:+:$current}" ;;
            esac ;;
        *) [ "$already" = set ] || echo "export $name=$value" ;;
    esac
done
