"""The AWS engine: rented capacity created with Pulumi (pulumi-aws), checked first with boto3.

Modules, one job each (pulumi and boto3 are imported only by the modules that need them, so importing this
package, the CLI's --help and `validate` stay free of both):

- config      the typed stack config (what render/cloud.py writes; what the Pulumi program reads)
- launch      EC2 launch parameters derived from the config (ENI layout, market options), shared by the
              Pulumi launch template and the boto3 launch path (RunInstances for nodes Slurm powers up)
- userdata    cloud-init user-data for cloud nodes (push vs pull: see its docstring)
- network, security, iam, storage, compute, program
              the Pulumi ComponentResources and the program that wires them (stacks/aws runs it)
- automation  the Pulumi Automation API wrapper: one stack per cluster, local or s3 backend
- progress    a live view of Pulumi engine events
- preflight   account checks with boto3 (offerings, EFA, quotas, reservations, AMIs) as findings
- up          cloud_up / cloud_down: the order `clusterctl up` and `down` follow for aws capacity
"""
