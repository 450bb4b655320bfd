"""Reading results: `open_results` gives the labelled Dataset, `to_frame` the flat table of `query`.

The flat table has one row per stored point (and per `seed` and `iteration` where the method has
them), a column per coordinate and per scalar variable; a p x p variable X appears as X_i_j (1-based).
Convergence logs (dims such as `se_iteration`) stay in the Dataset only.

`write_table` (what `seqphase query` runs) streams the table: it reads only the variables that appear
in it, a block of grid values at a time (BLOCK_ROWS rows), and writes each block before reading the
next, so its memory does not grow with the store. Damaged chunks (checksum) are found before anything
is printed; a chunk that cannot be decoded is reported as one line, never a traceback.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np

from seqphase.core.errors import StoreError
from seqphase.results.store import DONE, LEDGER, STATUS_NAMES, Store, _quiet, _short

ROW_DIMS = ("seed", "iteration", "stage")
MATRIX_DIMS = ("row", "col")
BLOCK_ROWS = 100_000  # rows of the table read and written at a time by write_table


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
    group = Store(store).open_sweep(sweep_name(sweep))
    ds = _open_dataset(group, chunks="auto" if lazy else None)
    if lazy:
        return ds
    return _load(ds, group)


def _open_dataset(group, chunks=None):
    """The group as a lazy Dataset (consolidated metadata when present: one file read), grid dims sorted."""
    import xarray as xr

    with _quiet():
        warnings.filterwarnings("ignore", message=".*Failed to open Zarr store with consolidated metadata.*")
        ds = xr.open_zarr(str(group.store.path), group=group.name, chunks=chunks)
    for dim in group.dims:
        if ds.sizes[dim] > 1:
            ds = ds.sortby(dim)
    return ds


def _load(ds, group):
    try:
        with _quiet():
            return ds.load()
    except Exception as exc:  # noqa: BLE001 -- a chunk that cannot be decoded
        raise damaged_error(group, f"a chunk cannot be read ({_short(exc)})") from None


def damaged_error(group, what):
    return StoreError(f"{group.store.path}/{group.name}", f"damaged data: {what}",
                      f"`seqphase verify {group.name}` lists the damaged points, `seqphase run {group.name}` "
                      "recomputes them")


def table_variables(ds):
    """The data variables that `to_frame` turns into columns (others, like convergence logs, are not read)."""
    dims = list(ds.attrs["point_dims"])
    row_dims = set(dims) | {d for d in ROW_DIMS if d in ds.dims}
    keep = []
    for name, var in ds.data_vars.items():
        extra = [d for d in var.dims if d not in row_dims]
        if not extra or sorted(extra) == sorted(MATRIX_DIMS):
            keep.append(name)
    return keep


def write_table(sweep, store, out, fmt="csv", include_all=False):
    """Stream the table of `seqphase query` into the text file `out`, a block of grid values at a time."""
    from seqphase.results.verify import find_damage

    group = Store(store).open_sweep(sweep_name(sweep))
    ds = _open_dataset(group)
    names = table_variables(ds)
    damages = find_damage(group, names=[n for n in names if n in group.arrays])
    if damages:
        cells = int(sum(np.ones(group.grid_shape, dtype=bool)[d.region].sum() for d in damages))
        raise damaged_error(group, f"{len(damages)} chunks fail their checksum (up to {cells} points, "
                            f"first {damages[0].array}/c/{'/'.join(map(str, damages[0].chunk))})")
    ds = ds[names]
    dims = list(ds.attrs["point_dims"])
    split = next((d for d in dims if ds.sizes[d] > 1), dims[0])
    rows_per_value = int(np.prod([ds.sizes[d] for d in dims if d != split] +
                                 [ds.sizes[d] for d in ROW_DIMS if d in ds.dims]))
    step = max(1, BLOCK_ROWS // max(1, rows_per_value))
    header_written, rows_written = False, 0
    for start in range(0, ds.sizes[split], step):
        frame = to_frame(_load(ds.isel({split: slice(start, start + step)}), group), include_all=include_all)
        if fmt == "csv":
            frame.to_csv(out, index=False, header=not header_written)
            header_written = True
            continue
        if not header_written:  # the same text as frame_to_json of the whole table, written as it comes
            head = json.dumps({"sweep": ds.attrs.get("seqphase_sweep"), "model": ds.attrs.get("model"),
                               "method": ds.attrs.get("method"), "columns": list(frame.columns), "rows": []},
                              indent=1)
            out.write(head[: head.rindex("]")])
            header_written = True
        for record in frame.to_dict(orient="records"):
            text = json.dumps({k: _plain(v) for k, v in record.items()}, indent=1)
            out.write(("," if rows_written else "") + "\n" + "\n".join("  " + line for line in text.splitlines()))
            rows_written += 1
    if fmt == "json":
        out.write(("\n ]" if rows_written else "]") + "\n}\n")


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
