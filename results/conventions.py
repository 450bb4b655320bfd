"""Conventions of every stored sweep: one name per quantity across families, CF-style attributes on every
variable, times as CF times, and the renames that read older stores.

- **Names.** The error of an estimator is `mse` in every family (the per-entry squared error; the
  Bayes-optimal one where the method is Bayes-optimal). Stores written before this convention called the
  BSR state-evolution error `mmse`; `RENAMED` maps such old names to the current ones. `open_results` and
  `seqphase query` read old groups under the new names, `seqphase migrate` renames the arrays on disk (the
  numbers are not rewritten: bit for bit), and `seqphase run` on an old group asks for the migration first
  (it would otherwise write the new name into a group that lacks it).
- **Attributes** (xarray / CF): every variable carries `long_name` and, when numeric, `units` ("1" for the
  dimensionless quantities of these models, "s" for wall times), plus the longer `doc`. The model's
  `Variable` may set its own `long_name` and `units`; otherwise `long_name` is the first clause of its doc.
- **Times.** `finished_at` is stored as a CF time: float seconds with `units = "seconds since
  1970-01-01T00:00:00+00:00"` and `calendar = "proleptic_gregorian"`, so xarray decodes it to
  `datetime64[ns]` (NaT where not finished); `seqphase query` prints it in ISO 8601 (UTC). Groups written
  before this convention lack the units; `open_results` decodes them the same way.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

TIME_UNITS = "seconds since 1970-01-01T00:00:00+00:00"
TIME_ATTRS = {"units": TIME_UNITS, "calendar": "proleptic_gregorian", "standard_name": "time"}

#: CF attributes of the ledger's variables (their `doc` is schema.LEDGER's meaning)
LEDGER_ATTRS = {
    "status": {"long_name": "point status", "units": "1", "flag_values": [0, 1, 2, 3],
               "flag_meanings": "not_requested pending done failed"},
    "point_hash": {"long_name": "content hash of the point"},
    "error": {"long_name": "reason of the last failure"},
    "runtime_s": {"long_name": "seconds of work of the point (summed over its works)", "units": "s"},
    "finished_at": {"long_name": "time the point was stored (UTC)", **TIME_ATTRS},
    "attempts": {"long_name": "runs that computed the point", "units": "1"},
    "host": {"long_name": "host that computed the point"},
    "worker": {"long_name": "Dask worker that computed the point"},
    "slurm_job_id": {"long_name": "SLURM job of the worker"},
}

#: (model, method) -> {old variable name: current name}, for stores written before the naming convention
RENAMED = {("bsr", "se"): {"mmse": "mse"}}


def long_name(doc):
    """A short label from a variable's doc: its first clause (up to a parenthesis, ';', ':' or ' = ')."""
    text = " ".join(str(doc).split())
    head = re.split(r" \(|; |: | = |, ", text, maxsplit=1)[0].strip()
    head = re.sub(r"\s+(of|at|in|for|with|on|by|to)$", "", head)  # "threshold of (rho, beta)" -> "threshold"
    return head or text


def variable_attrs(var):
    """The stored attributes of a model `Variable`: long_name, units (numeric only) and doc."""
    attrs = {"long_name": getattr(var, "long_name", "") or long_name(var.doc), "doc": var.doc}
    if np.dtype(var.dtype).kind in "fiub":
        attrs["units"] = getattr(var, "units", "") or "1"
    return attrs


def ledger_attrs(name, doc):
    return {**LEDGER_ATTRS[name], "doc": doc}


def coordinate_attrs(name, dtype, param=None):
    """The attributes of a coordinate: its long_name from the model's `Param` doc (a method axis or an
    extra dim such as `seed` or `iteration`: its name) and units "1" when numeric."""
    attrs = {"long_name": long_name(param.doc) if param is not None and param.doc else name.replace("_", " ")}
    if np.dtype(dtype).kind in "fiub":
        attrs["units"] = "1"
    return attrs


# -- old names ----------------------------------------------------------------------------------------
def renames(model, method):
    return RENAMED.get((model, method), {})


def old_names(group):
    """[(old, new)] of the variables of a stored group (a results.store.SweepGroup) still under old names."""
    table = renames(group.attrs.get("model"), group.attrs.get("method"))
    return [(old, new) for old, new in table.items() if old in group.variables]


def current_dataset(ds):
    """An opened Dataset with old variable names renamed and an undecoded (older) `finished_at` decoded."""
    table = renames(ds.attrs.get("model"), ds.attrs.get("method"))
    rename = {old: new for old, new in table.items() if old in ds.variables and new not in ds.variables}
    if rename:
        ds = ds.rename(rename)
        ds.attrs["variables"] = [rename.get(v, v) for v in ds.attrs.get("variables", [])]
    if "finished_at" in ds.variables and ds["finished_at"].dtype.kind == "f":
        attrs = dict(ds["finished_at"].attrs)
        ds["finished_at"] = (ds["finished_at"].dims, to_datetime64(ds["finished_at"].values),
                             {**attrs, **{k: v for k, v in LEDGER_ATTRS["finished_at"].items()
                                          if k not in TIME_ATTRS}})
    return ds


def _write_json(path, data):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


# -- times --------------------------------------------------------------------------------------------
def to_datetime64(seconds):
    """Float Unix seconds (NaN = not finished) as datetime64[ns] (NaT)."""
    seconds = np.asarray(seconds, dtype=float)
    out = np.full(seconds.shape, np.datetime64("NaT"), dtype="datetime64[ns]")
    ok = np.isfinite(seconds)
    out[ok] = (np.round(seconds[ok] * 1e6).astype(np.int64)).astype("datetime64[us]").astype("datetime64[ns]")
    return out


def iso8601(values):
    """datetime64 values or float Unix seconds as ISO 8601 UTC strings ('' where not finished)."""
    values = np.asarray(values)
    if values.dtype.kind == "f":
        values = to_datetime64(values)
    out = np.full(values.shape, "", dtype=object)
    ok = ~np.isnat(values)
    seconds = values[ok].astype("datetime64[s]")
    out[ok] = [str(v) + "Z" for v in seconds]
    return out
