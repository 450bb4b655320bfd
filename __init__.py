"""seqphase: phase diagrams of solvable models of learning, swept on Dask, stored in zarr."""

from seqphase.version import __version__


def open_results(sweep, store=None, lazy=False):
    """Open the stored results of a sweep as an ``xarray.Dataset`` (see ``seqphase.results.query``)."""
    from seqphase.results.query import open_results as _open

    return _open(sweep, store=store, lazy=lazy)


__all__ = ["__version__", "open_results"]
