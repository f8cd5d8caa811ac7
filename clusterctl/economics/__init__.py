"""Cost and sizing answers: `clusterctl cost` (per pool, total, rent vs buy) and `clusterctl size` (memory, GPUs,
training days, a starter spec). Pure functions; the CLI prints them."""
