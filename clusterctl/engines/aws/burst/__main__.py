"""python -m clusterctl.engines.aws.burst: the burst programs without the rest of the CLI (the controller runs them so)."""

from clusterctl.engines.aws.burst.cli import main

main()
