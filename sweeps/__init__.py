"""seqphase.sweeps: what to compute, with no Dask and no I/O beyond reading specs.

spec (a TOML sweep spec parsed and validated into a `Sweep`, `--set` overrides), planner (a `Sweep` into
points with stable content hashes), papers (the table of papers `seqphase reproduce` covers: their sweeps,
figures, reduced `--quick` grids and measured costs), specs/ (the shipped sweeps) and reference/ (the
published data files the figures and the agreement table compare against).
"""
