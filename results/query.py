"""Reading results: `open_results` gives the labelled Dataset, `to_frame` the flat table of `query`.

The flat table has one row per stored point (and per `seed` and `iteration` where the method has
them), a column per coordinate and per scalar variable; a p x p variable X appears as X_i_j (1-based).
Convergence logs (dims such as `se_iteration`) stay in the Dataset only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from seqphase.results.store import DONE, LEDGER, STATUS_NAMES, Store, _quiet

ROW_DIMS = ("seed", "iteration", "stage")
MATRIX_DIMS = ("row", "col")


def sweep_name(sweep):
    """A sweep is named by its shipped name, its stored name, or the path of its spec file."""
    if sweep.endswith(".toml") and Path(sweep).is_file():
        from seqphase.sweeps.spec import load_sweep

        return load_sweep(sweep).name
    return sweep


def open_results(sweep, store=None, lazy=False):
    """The results of a sweep as an xarray.Dataset, grid dims sorted (grown grids append values).

    Phase-diagram results are small, so they are loaded into memory unless `lazy` (then the
    variables are dask arrays backed by the store)."""
    import xarray as xr

    group = Store(store).open_sweep(sweep_name(sweep))
    with _quiet():
        ds = xr.open_zarr(str(group.store.path), group=group.name, consolidated=False)
    for dim in group.dims:
        if ds.sizes[dim] > 1:
            ds = ds.sortby(dim)
    return ds if lazy else ds.load()


def to_frame(ds, include_all=False):
    """The flat table (a pandas DataFrame) of `seqphase query`; done points only unless include_all."""
    import xarray as xr

    dims = list(ds.attrs["point_dims"])
    row_dims = dims + [d for d in ROW_DIMS if d in ds.dims]
    flat = xr.Dataset(coords={d: ds[d] for d in row_dims})
    order = list(ds.attrs.get("variables", [])) + [v for v in ds.data_vars if v not in ds.attrs.get("variables", [])]
    for name in order:
        var = ds[name]
        extra = [d for d in var.dims if d not in row_dims]
        if not extra:
            flat[name] = var
        elif sorted(extra) == sorted(MATRIX_DIMS):
            for i in ds["row"].values:
                for j in ds["col"].values:
                    flat[f"{name}_{int(i)}_{int(j)}"] = var.sel(row=i, col=j, drop=True)
    frame = flat.to_dataframe().reset_index()
    if not include_all:
        frame = frame[frame["status"] == DONE]
    frame["status"] = frame["status"].map(lambda code: STATUS_NAMES.get(int(code), str(code)))
    # Coordinates, then the model's variables in layout order, then the ledger.
    ledger = [c for c in LEDGER if c in frame.columns]
    data = [c for c in frame.columns if c not in row_dims and c not in ledger]
    return frame[row_dims + data + ledger].reset_index(drop=True)


def frame_to_json(frame, ds):
    rows = []
    for record in frame.to_dict(orient="records"):
        rows.append({k: _plain(v) for k, v in record.items()})
    return json.dumps({"sweep": ds.attrs.get("seqphase_sweep"), "model": ds.attrs.get("model"),
                       "method": ds.attrs.get("method"), "columns": list(frame.columns), "rows": rows}, indent=1)


def _plain(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value
