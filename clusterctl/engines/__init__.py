"""Everything that touches machines: lab nodes, owned hosts over SSH, AWS (Pulumi, boto3, burst), Ansible."""
