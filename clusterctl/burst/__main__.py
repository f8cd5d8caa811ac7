"""python -m clusterctl.burst: the burst programs without the rest of the CLI (the controller runs them so)."""

from clusterctl.burst.cli import main

main()
