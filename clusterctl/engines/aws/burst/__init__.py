"""Hybrid burst: Slurm power saving grows an owned cluster into rented EC2 capacity and shrinks it back.

Slurm decides *when* (State=CLOUD nodes, SuspendTime, ResumeTimeout in the rendered slurm.conf); these programs,
run by slurmctld on the controller as SlurmUser, decide *how*:

  clusterctl burst resume HOSTLIST       ResumeProgram. One all-or-nothing RunInstances (MinCount = MaxCount) per
                                         job (SLURM_RESUME_FILE), from the pool's launch template; on capacity
                                         errors the next AZ of the pool; Name/cluster/pool tags; NodeAddr set in
                                         Slurm; then a detached bootstrap makes each instance a Slurm node. Where
                                         nothing is left the nodes go back to POWER_DOWN with the cloud error code
                                         in the reason (never a permanent DOWN) and the job stays pending.
  clusterctl burst suspend HOSTLIST      SuspendProgram: terminate the nodes' instances, found by tag.
  clusterctl burst resume-fail HOSTLIST  ResumeFailProgram: terminate, then POWER_DOWN with the reason.
  clusterctl burst sync                  a timer on the controller: the cloud's tags are the source of truth;
                                         instances without a (powered-up) Slurm node are terminated, powered-up
                                         nodes whose instance vanished are powered down.

How an instance becomes a Slurm node (the same in the lab and on AWS): the image carries the packages (a
pre-converged AMI in production; a stock Debian image works too, the bootstrap then apt-installs slurmd and munge),
and the controller pushes the rest over SSH, once, as soon as the instance answers (clusterctl.engines.aws.burst.bootstrap):
hostname, /etc/hosts, munge key, the controller's own Slurm config files, the pool's NCCL env / health files, the
spot-interruption watcher; then slurmd starts with `-N <node>` and registers (cloud_reg_addrs). Push, not pull,
like the rest of clusterctl: no repository or build credentials on the node, failures land in the controller's
log (/var/log/clusterctl/burst.log) next to the launch that caused them.

Every run is logged, holds a lock (launch/terminate share it, sync takes it alone), and is safe to repeat:
resume reuses a live instance already tagged with the node's name instead of launching a second one.
"""
