"""Pipeline planning: shards, paths and status for the Snakemake DAG (unit-tested here,
not in the Snakefile)."""
