"""seqphase: phase diagrams of solvable models of learning, swept on Dask, stored in zarr.

The Python API (`seqphase.api`, the functions the command line calls):

- `run(sweep, *, set=None, store=None, client=None, workers=None, retries=2, progress=True)` runs a sweep
  (a shipped name, a .toml path or a dict) and returns its `xarray.Dataset`;
- `open_results(sweep, store=None)` opens what is stored;
- `status`, `retry_failed`, `reproduce`, `list_sweeps`;
- `Likelihood` and `Prior`: base classes of a user channel or prior (`seqphase.core.plugins`).
"""

from seqphase.api import list_sweeps, reproduce, retry_failed, run, status
from seqphase.core.plugins import Likelihood, Prior
from seqphase.version import __version__


def open_results(sweep, store=None, lazy=False):
    """Open the stored results of a sweep as an ``xarray.Dataset`` (see ``seqphase.results.query``)."""
    from seqphase.results.query import open_results as _open

    return _open(sweep, store=store, lazy=lazy)


__all__ = ["__version__", "open_results", "run", "retry_failed", "status", "reproduce", "list_sweeps",
           "Likelihood", "Prior"]
