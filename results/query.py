"""Reading results: `open_results` gives the labelled Dataset, `to_frame` the flat table of `query`.

The flat table has one row per stored point (and per `seed` and per `iteration` (GAMP), `epoch` or
`step` (GD) where a variable of the table has them), a column per coordinate and per scalar variable; a
p x p variable X appears as X_i_j (1-based), a variable per size d (an onset sweep's per-size estimates) as
X_<d>. Arrays with other dims (an onset sweep's instances: size x alpha step x seed) stay in the Dataset.
Convergence logs (dims such as `se_iteration`) stay in the Dataset only.

`write_table` (what `seqphase query` runs) streams the table: it reads only the variables that appear
in it, a block of grid values at a time (BLOCK_ROWS rows), and writes each block before reading the
next, so its memory does not grow with the store. Damaged chunks (checksum, or written and now
missing: results/manifest.py) are found before anything is printed; a chunk that cannot be decoded is
reported as one line, never a traceback.

Readers during a run see whole points only: the driver writes a batch's data and ledger before its
`status` flags (each chunk file replaced atomically), so a reader that reads `status` first and the
rest after sees, for every point done in its `status`, the values written before it. `write_table`
reads each block's `status` first; `open_results` reads `status` first and keeps that copy.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np

from seqphase.core.errors import StoreError
from seqphase.results.conventions import current_dataset, iso8601, renames
from seqphase.results.store import DONE, LEDGER, STATUS_NAMES, Store, _key, _quiet, _short

#: per-point dims that become rows: seeds, and the time axis of an algorithm (GAMP iterations, GD epochs of
#: the AIM and BSR, GD steps of the quadratic network) or of a staged threshold
ROW_DIMS = ("seed", "iteration", "epoch", "step", "stage")
MATRIX_DIMS = ("row", "col")
#: per-point dims whose values become columns X_<value>: the sizes d of an onset sweep's per-size onsets
COLUMN_DIMS = ("size",)
BLOCK_ROWS = 16_384  # rows of the table read and written at a time by write_table


def sweep_name(sweep):
    """A sweep is named by its shipped name, its stored name, or the path of its spec file. Only for a name
    the user typed: a value read from a store is a name, never a path (`open_stored`)."""
    if sweep.endswith(".toml") and Path(sweep).is_file():
        from seqphase.sweeps.spec import load_sweep

        return load_sweep(sweep).name
    return sweep


def open_results(sweep, store=None, lazy=False):
    """The results of a sweep as an xarray.Dataset, grid dims sorted (grown grids append values).

    Phase-diagram results are small, so they are loaded into memory unless `lazy` (then the
    variables are dask arrays backed by the store). `seqphase.open_results` documents the parameters."""
    return open_stored(sweep_name(sweep), store, lazy)


def open_stored(name, store=None, lazy=False):
    """`open_results` of the group stored under the sweep name `name`: no spec file is read, so a name found
    in a store (a `[plot]` companion) can only name another group of that store."""
    group = Store(store).open_sweep(name)
    ds = current_dataset(_open_dataset(group, chunks="auto" if lazy else None))
    if lazy:
        return ds
    return _load(ds, group)


def select_grid(ds, coords):
    """`ds` restricted to a grid: {dim: values} (a plan's coordinates), each dim keeping its stored order.
    Dims not named keep all their values."""
    picks = {}
    for dim, values in coords.items():
        if dim in ds.dims:
            wanted = {_key(v) for v in values}
            picks[dim] = [i for i, v in enumerate(ds[dim].values) if _key(v) in wanted]
    return ds.isel(picks)


def _open_dataset(group, chunks=None):
    """The group as a lazy Dataset, grid dims sorted. It is read from each array's own metadata, the files
    that opening the group checked (names, sizes, links), never from a consolidated copy that could declare
    something else; folders of the group that are not its arrays are left out unread. The root's consolidated
    metadata is not used either: a group copied in from another store is not listed there."""
    import xarray as xr

    from seqphase.results.durable import DurableStore

    with _quiet():
        warnings.filterwarnings("ignore", message=".*Failed to open Zarr store with consolidated metadata.*")
        known = set(group.arrays) | set(group.extra)  # anything else in the folder is not read at all
        others = [p.name for p in group.folder.iterdir() if p.is_dir() and p.name not in known]
        # read-only, and every file through safe_io (no link, no special file, sizes capped)
        ds = xr.open_zarr(DurableStore(group.store.path, read_only=True), group=group.name, chunks=chunks,
                          consolidated=False, drop_variables=others)
    for dim in group.dims:
        if ds.sizes[dim] > 1:
            ds = ds.sortby(dim)
    return ds


def _load(ds, group):
    """Load the Dataset: `status` first, the rest after (whole points during a run), and refuse damage:
    a chunk that cannot be decoded, or one the manifest lists that is gone."""
    from seqphase.results.verify import find_damage

    try:
        with _quiet():
            status = ds["status"].load()
            ds = ds.load()
    except Exception as exc:  # noqa: BLE001 -- a chunk that cannot be decoded
        raise damaged_error(group, f"a chunk cannot be read ({_short(exc)})") from None
    gone = find_damage(group, missing_only=True)
    if gone:
        raise damaged_error(group, f"{len(gone)} chunks written by a run are missing "
                            f"(first {gone[0].array}/c/{'/'.join(map(str, gone[0].chunk))})")
    return ds.assign(status=status)


def damaged_error(group, what):
    return StoreError(f"{group.store.path}/{group.name}", f"damaged data: {what}",
                      f"`seqphase verify {group.name}` lists the damaged points, `seqphase run {group.name}` "
                      "recomputes them")


def write_table(sweep, store, out, fmt="csv", include_all=False):
    """Stream the table of `seqphase query` into the text file `out`, a block of grid values at a time.

    The same table as `to_frame(open_results(...))`, built from the zarr arrays directly (no xarray:
    half of a small query's time was importing it) and only from the variables in the table."""
    from seqphase.results.verify import damage_summary, find_damage

    group = Store(store).open_sweep(sweep_name(sweep))
    table = _Table(group)
    damages = find_damage(group, names=table.arrays)
    if damages:
        cells = int(sum(np.ones(group.grid_shape, dtype=bool)[d.region].sum() for d in damages))
        raise damaged_error(group, f"{damage_summary(damages)} (up to {cells} points, "
                            f"first {damages[0].array}/c/{'/'.join(map(str, damages[0].chunk))})")
    header_written, rows_written = False, 0
    for frame in table.frames(include_all):
        if fmt == "csv":
            frame.to_csv(out, index=False, header=not header_written)
            header_written = True
            continue
        if not header_written:  # the same text as frame_to_json of the whole table, written as it comes
            head = json.dumps({"sweep": group.attrs.get("seqphase_sweep"), "model": group.attrs.get("model"),
                               "method": group.attrs.get("method"), "columns": list(frame.columns), "rows": []},
                              indent=1)
            out.write(head[: head.rindex("]")])
            header_written = True
        for record in frame.to_dict(orient="records"):
            text = json.dumps({k: _plain(v) for k, v in record.items()}, indent=1)
            out.write(("," if rows_written else "") + "\n" + "\n".join("  " + line for line in text.splitlines()))
            rows_written += 1
    if fmt == "json":
        out.write(("\n ]" if rows_written else "]") + "\n}\n")


def _layout(names, vdims, grid_dims, values):
    """(row dims, columns) of the table, for `write_table` and `to_frame` alike. columns: (column name,
    variable, {dim: position}) for each variable whose dims beyond the grid and ROW_DIMS are none, the
    (row, col) of a matrix (X_i_j) or one of COLUMN_DIMS (X_<value>); `values(dim)` gives a dim's values.
    Row dims: the grid's, then the ROW_DIMS that some column has (an onset sweep's instances have a seed
    dim but are no column: as rows, every point's values would repeat once per seed)."""
    allowed = set(grid_dims) | set(ROW_DIMS)
    columns = []
    for name in names:
        extra = [d for d in vdims[name] if d not in allowed]
        if not extra:
            columns.append((name, name, {}))
        elif sorted(extra) == sorted(MATRIX_DIMS):
            for i, row in enumerate(values("row")):
                for j, col in enumerate(values("col")):
                    columns.append((f"{name}_{int(row)}_{int(col)}", name, {"row": i, "col": j}))
        elif len(extra) == 1 and extra[0] in COLUMN_DIMS:
            for i, value in enumerate(values(extra[0])):
                columns.append((f"{name}_{int(value)}", name, {extra[0]: i}))
    used = {d for _, name, fixed in columns for d in vdims[name] if d not in fixed}
    return list(grid_dims) + [d for d in ROW_DIMS if d in used], columns


class _Table:
    """The rows of `to_frame`, a block of grid values at a time, read straight from the group's arrays."""

    def __init__(self, group):
        self.group = group
        self.dims = list(group.dims)
        names = group.variables + list(LEDGER)
        self.vdims = {n: list(group.arrays[n].metadata.dimension_names or ()) for n in names}
        present = {d for n in names for d in self.vdims[n]}
        with _quiet():
            self.extra = {d: group.group[d][...] for d in (*ROW_DIMS, *MATRIX_DIMS, *COLUMN_DIMS) if d in present}
        current = renames(group.attrs.get("model"), group.attrs.get("method"))  # old stores: current names
        self.row_dims, columns = _layout(names, self.vdims, self.dims, self.extra.__getitem__)
        self.extra_rows = self.row_dims[len(self.dims):]
        # (column, array, {dim: position} to fix)
        self.columns = [(current.get(column, column) if column == name else column, name, fixed)
                        for column, name, fixed in columns]
        self.arrays = sorted({array for _, array, _ in self.columns})
        # Grown grids append values: rows come sorted by every grid dim (as open_results sorts them).
        self.order = {d: np.argsort(group.coords[d], kind="stable") for d in self.dims}

    def frames(self, include_all):
        import pandas as pd

        dims = self.dims
        split = next((d for d in dims if len(self.order[d]) > 1), dims[0])
        per_value = int(np.prod([len(self.order[d]) for d in dims if d != split] +
                                [len(self.extra[d]) for d in self.extra_rows]))
        step = max(1, BLOCK_ROWS // max(1, per_value))
        for start in range(0, len(self.order[split]), step):
            index = {d: self.order[d] if d != split else self.order[d][start:start + step] for d in dims}
            shape = [len(index[d]) for d in dims] + [len(self.extra[d]) for d in self.extra_rows]
            values = {d: self.group.coords[d][index[d]] for d in dims}
            values.update({d: self.extra[d] for d in self.extra_rows})
            columns = {d: _spread(values[d], [d], self.row_dims, shape) for d in self.row_dims}
            blocks = {}
            for array in sorted(self.arrays, key=lambda a: a != "status"):  # status first: whole points
                arr = self.group.arrays[array]
                selection = tuple(index[d] for d in dims) + (slice(None),) * (arr.ndim - len(dims))
                try:
                    with _quiet():
                        blocks[array] = arr.oindex[selection]
                except Exception as exc:  # noqa: BLE001 -- a chunk that cannot be decoded
                    raise damaged_error(self.group, f"a chunk of {array!r} cannot be read ({_short(exc)})") from None
            for column, array, fixed in self.columns:
                block, vdims = blocks[array], list(self.vdims[array])
                for d, position in fixed.items():
                    block = np.take(block, position, axis=vdims.index(d))
                    vdims.remove(d)
                columns[column] = _spread(block, vdims, self.row_dims, shape)
            frame = pd.DataFrame(columns)
            if not include_all:
                frame = frame[frame["status"] == DONE]
            frame["status"] = frame["status"].map(lambda code: STATUS_NAMES.get(int(code), str(code)))
            frame["finished_at"] = iso8601(frame["finished_at"].to_numpy())
            yield frame.reset_index(drop=True)


def _spread(values, dims, row_dims, shape):
    """`values` over `dims` (a subset of row_dims), broadcast over the row grid and flattened (C order)."""
    values = np.transpose(values, [dims.index(d) for d in row_dims if d in dims])
    expanded = values.reshape([shape[k] if d in dims else 1 for k, d in enumerate(row_dims)])
    return np.broadcast_to(expanded, shape).ravel()


def to_frame(ds, include_all=False):
    """The flat table (a pandas DataFrame) of `seqphase query`; done points only unless include_all."""
    import xarray as xr

    dims = list(ds.attrs["point_dims"])
    order = list(ds.attrs.get("variables", [])) + [v for v in ds.data_vars if v not in ds.attrs.get("variables", [])]
    row_dims, columns = _layout(order, {name: list(ds[name].dims) for name in order}, dims,
                                lambda d: ds[d].values)
    flat = xr.Dataset(coords={d: ds[d] for d in row_dims})
    for column, name, fixed in columns:
        flat[column] = ds[name].isel(fixed, drop=True)
    frame = flat.to_dataframe().reset_index()
    if not include_all:
        frame = frame[frame["status"] == DONE]
    frame["status"] = frame["status"].map(lambda code: STATUS_NAMES.get(int(code), str(code)))
    if "finished_at" in frame.columns:
        frame["finished_at"] = iso8601(frame["finished_at"].to_numpy())
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
