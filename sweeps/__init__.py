"""seqphase.sweeps: what to compute, with no Dask and no I/O beyond reading the families' specs and published data.

spec (a TOML sweep spec parsed and validated into a `Sweep`, `--set` overrides), planner (a `Sweep` into
points with stable content hashes), families (the one reader of the model families' files: their sweep specs
and the published data their figures and agreement checks compare against), papers (`Paper` and `Run`, and
the papers of every family that `seqphase reproduce` covers: their sweeps, figures, reduced `--quick` grids)
and costs (the measured costs, costs.toml).
"""
