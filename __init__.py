"""seqphase: phase diagrams of solvable models of learning, swept on Dask, stored in zarr.

The Python API (`seqphase.api`, the functions the command line calls):

- `run(sweep, *, set=None, store=None, client=None, workers=None, retries=2, progress=True)` runs a sweep
  (a shipped name, a .toml path or a dict) and returns its `xarray.Dataset`;
- `open_results(sweep, store=None)` opens what is stored;
- `status`, `retry_failed`, `reproduce`, `list_sweeps`, and `seqphase.api.check` (``seqphase check``);
- `Likelihood` and `Prior`: base classes of a user channel or prior (`seqphase.core.plugins`).
"""

from seqphase.api import list_sweeps, reproduce, retry_failed, run, status
from seqphase.core.plugins import Likelihood, Prior
from seqphase.version import __version__


def open_results(sweep, store=None, lazy=False):
    """Open the stored results of a sweep.

    Parameters
    ----------
    sweep : str
        The sweep's name in the store.
    store : str or pathlib.Path, optional
        The zarr store (default ``$SEQPHASE_STORE``, else ``./seqphase.zarr``).
    lazy : bool
        Leave the variables as dask arrays backed by the store instead of loading them.

    Returns
    -------
    xarray.Dataset
        One dim per model parameter (grid values sorted, also those appended by later runs) and per
        extra dim of the method; the variables, the ledger (``status``: 2 = done) and the provenance
        attributes. Points not done hold fill values (NaN).

    Raises
    ------
    seqphase.core.errors.SeqphaseError
        No such sweep, a damaged chunk (``seqphase verify`` lists it), or a store that is not one.
    """
    from seqphase.results.query import open_results as _open

    return _open(sweep, store=store, lazy=lazy)


__all__ = ["__version__", "open_results", "run", "retry_failed", "status", "reproduce", "list_sweeps",
           "Likelihood", "Prior"]
