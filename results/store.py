"""The zarr store: one group per sweep, one labelled xarray Dataset per group, one writer.

Layout of a sweep group (readable with plain `xarray.open_zarr(store, group=name)`):
- grid dims: every model parameter (length 1 when fixed) and the method's own axes, each chunked by 1,
  so every point owns whole chunks; extra dims of the method (seed, iteration, row, col, ...) are
  whole inside the chunk;
- the model's output variables over (grid dims + their extra dims), NaN until written;
- the ledger over the grid dims: `status` (0 not requested, 1 pending, 2 done, 3 failed), `point_hash`,
  `error`, `runtime_s`, `finished_at`, `attempts`, `host`, `worker`, `slurm_job_id`;
- attrs: provenance (versions, git revision, host, spec, identity) and the list of runs.

Only the driver writes (workers return results): concurrent writers that share chunks silently lose
rows (spec storage-and-execution.md section 3), and a single writer of whole chunks cannot. For each
point the data are written first and the done flag last, so a crash in between leaves a point that is
simply recomputed. The grid grows (new parameter values are new points) by resizing along a dim, data
arrays first and the coordinate last; an interrupted extension is rolled back on the next open.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np

from seqphase.core.errors import StoreError

STORE_FORMAT = 1
DEFAULT_STORE = os.path.join("results", "seqphase.zarr")

NOT_REQUESTED, PENDING, DONE, FAILED = 0, 1, 2, 3
STATUS_NAMES = {NOT_REQUESTED: "not requested", PENDING: "pending", DONE: "done", FAILED: "failed"}

# name -> (dtype, fill, meaning)
LEDGER = {
    "status": ("i1", 0, "0 not requested, 1 pending, 2 done, 3 failed"),
    "point_hash": ("U64", "", "SHA-256 of the point's parameters, settings and algorithm version"),
    "error": ("U256", "", "reason of the last failure ('' if none)"),
    "runtime_s": ("f8", np.nan, "wall time of the point on its worker, seconds"),
    "finished_at": ("f8", np.nan, "when the point was stored, seconds since the epoch (UTC)"),
    "attempts": ("i2", 0, "how many runs have computed this point"),
    "host": ("U64", "", "host that computed the point"),
    "worker": ("U64", "", "Dask worker address that computed the point"),
    "slurm_job_id": ("U32", "", "SLURM job of the worker, if any"),
}
ERROR_WIDTH = 256


@contextlib.contextmanager
def _quiet():
    """Fixed-width unicode arrays are stable in practice; silence zarr's v3 'unstable dtype' notes."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*unstable.*")
        warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification.*")
        warnings.filterwarnings("ignore", category=FutureWarning)
        yield


def now_iso():
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def git_revision():
    here = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def provenance():
    import dask
    import distributed
    import scipy
    import xarray
    import zarr

    from seqphase.version import __version__

    return {"seqphase_version": __version__, "git_revision": git_revision(), "host": socket.gethostname(),
            "python": sys.version.split()[0],
            "versions": {"numpy": np.__version__, "scipy": scipy.__version__, "dask": dask.__version__,
                         "distributed": distributed.__version__, "xarray": xarray.__version__,
                         "zarr": zarr.__version__}}


class Store:
    """A seqphase zarr store on disk (a directory)."""

    def __init__(self, path=None):
        self.path = Path(path or DEFAULT_STORE)

    # -- validation -----------------------------------------------------------------------------
    def check(self, create=False, allow_missing=False):
        """Raise StoreError unless the path is a seqphase store (or absent/empty: then create it if
        `create`, accept it if `allow_missing`)."""
        root_meta = self.path / "zarr.json"
        if not self.path.exists() or (self.path.is_dir() and not any(self.path.iterdir())):
            if allow_missing and not create:
                return self
            if not create:
                raise StoreError(str(self.path), "no seqphase store here",
                                 "run a sweep first (seqphase run SWEEP --store PATH) or give the right --store")
            return self._create_root()
        if not self.path.is_dir():
            raise StoreError(str(self.path), "exists and is not a zarr store directory",
                             "choose another --store path")
        if not root_meta.is_file():
            raise StoreError(str(self.path), "is a non-empty directory that is not a zarr store",
                             "choose another --store path; nothing was written")
        try:
            meta = json.loads(root_meta.read_text())
        except (OSError, ValueError) as exc:
            raise StoreError(str(self.path), f"corrupted store metadata ({exc})",
                             "restore the store from a copy or choose another --store path; nothing was written")
        attrs = meta.get("attributes", {}) if isinstance(meta, dict) else {}
        if meta.get("node_type") != "group" or "seqphase_store_format" not in attrs:
            raise StoreError(str(self.path), "is a zarr store written by something else (no seqphase_store_format)",
                             "choose another --store path; nothing was written")
        if attrs["seqphase_store_format"] > STORE_FORMAT:
            raise StoreError(str(self.path), f"store format {attrs['seqphase_store_format']} is newer than "
                             f"this seqphase ({STORE_FORMAT})", "upgrade seqphase")
        return self

    def _create_root(self):
        import zarr

        with _quiet():
            root = zarr.open_group(str(self.path), mode="a", zarr_format=3)
            root.attrs.update({"seqphase_store_format": STORE_FORMAT, "created_at": now_iso()})
        return self

    @contextlib.contextmanager
    def lock(self):
        """One driver per store at a time (an flock, released even if the driver is killed)."""
        self.path.mkdir(parents=True, exist_ok=True)
        handle = open(self.path / ".seqphase-driver.lock", "a+")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = handle.read().strip() or "another process"
                raise StoreError(str(self.path), f"another seqphase driver is writing this store ({holder})",
                                 "wait for it to finish, or use another --store")
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()} on {socket.gethostname()}")
            handle.flush()
            yield self
        finally:
            handle.close()

    # -- groups ---------------------------------------------------------------------------------
    def sweep_names(self):
        self.check()
        return sorted(p.name for p in self.path.iterdir() if (p / "zarr.json").is_file())

    def open_sweep(self, name):
        self.check()
        if not (self.path / name / "zarr.json").is_file():
            known = ", ".join(self.sweep_names()) or "none"
            raise StoreError(name, f"no results for this sweep in {self.path} (stored: {known})",
                             f"run it first: seqphase run {name} --store {self.path}")
        return SweepGroup(self, name)

    def prepare(self, plan):
        """Create the sweep's group (template written once) or check and extend the existing one."""
        self.check(create=True)
        name = plan.sweep.name
        if (self.path / name / "zarr.json").is_file():
            group = SweepGroup(self, name)
            group.check_identity(plan)
            group.extend(plan)
        else:
            group = SweepGroup.create(self, plan)
        group.update_spec(plan)
        return group


class SweepGroup:
    """One sweep's group: the ledger, region writes of single points, and grid extension."""

    def __init__(self, store, name):
        import zarr

        self.store, self.name = store, name
        with _quiet():
            try:
                self.group = zarr.open_group(str(store.path), mode="r+", path=name, zarr_format=3)
            except Exception as exc:  # zarr raises several types for broken metadata
                raise StoreError(f"{store.path}/{name}", f"corrupted sweep group ({exc})",
                                 "restore it from a copy or run under another --name; nothing was written")
        attrs = self.group.attrs.asdict()
        for key in ("seqphase_sweep", "point_dims", "identity", "variables"):
            if key not in attrs:
                raise StoreError(f"{store.path}/{name}", f"not a seqphase sweep group (missing attribute {key!r})",
                                 "choose another --name or --store; nothing was written")
        self.attrs = attrs
        self.dims = list(attrs["point_dims"])
        self.variables = list(attrs["variables"])
        missing = [a for a in self.dims + list(LEDGER) + self.variables if a not in self.group]
        if missing:
            raise StoreError(f"{store.path}/{name}", f"corrupted sweep group (array {missing[0]!r} is missing)",
                             "restore it from a copy or run under another --name; nothing was written")
        self._repair_interrupted_extension()
        self.coords = {d: self.group[d][:] for d in self.dims}
        shape = tuple(len(self.coords[d]) for d in self.dims)
        for name_ in list(LEDGER) + self.variables:
            if tuple(self.group[name_].shape[: len(self.dims)]) != shape:
                raise StoreError(f"{store.path}/{name}", f"corrupted sweep group (array {name_!r} has shape "
                                 f"{self.group[name_].shape}, grid is {shape})",
                                 "restore it from a copy or run under another --name")
        self._index = {d: {_key(v): i for i, v in enumerate(self.coords[d])} for d in self.dims}

    # -- creation -------------------------------------------------------------------------------
    @classmethod
    def create(cls, store, plan):
        import dask.array as da
        import xarray as xr

        dims = plan.dims
        coords = {d: _coord_array(plan.coords[d]) for d in dims}
        grid_shape = tuple(len(coords[d]) for d in dims)
        extra = {k: np.asarray(v) for k, v in plan.layout.extra_dims.items()}
        data_vars, encoding = {}, {}
        for name, var in plan.layout.variables.items():
            shape = grid_shape + tuple(len(extra[d]) for d in var.dims)
            chunks = (1,) * len(dims) + shape[len(dims):]
            fill = _fill(var.dtype)
            data_vars[name] = (dims + list(var.dims), da.full(shape, fill, dtype=var.dtype, chunks=chunks),
                               {"doc": var.doc})
            encoding[name] = {"chunks": chunks}
        for name, (dtype, fill, doc) in LEDGER.items():
            data_vars[name] = (dims, da.full(grid_shape, fill, dtype=dtype, chunks=(1,) * len(dims)), {"doc": doc})
            encoding[name] = {"chunks": (1,) * len(dims)}
        ds = xr.Dataset(data_vars, coords={**coords, **{k: v for k, v in extra.items()}})
        attrs = {
            "seqphase_sweep": plan.sweep.name,
            "title": plan.sweep.title,
            "description": plan.sweep.description,
            "reference": plan.sweep.reference,
            "model": plan.sweep.model,
            "method": plan.sweep.method,
            "seed": plan.sweep.seed,
            "settings": json.dumps(plan.sweep.settings),
            "identity": plan.identity,
            "identity_hash": plan.identity_hash,
            "algorithm_version": plan.model.algorithm_version(plan.sweep.method),
            "point_dims": dims,
            "variables": list(plan.layout.variables),
            "status_codes": json.dumps(STATUS_NAMES),
            "created_at": now_iso(),
            "runs": [],
            "plot": json.dumps(plan.sweep.plot),
            "provenance": provenance(),
        }
        ds.attrs.update({k: v for k, v in attrs.items() if isinstance(v, (str, int, float))})
        with _quiet():
            ds.to_zarr(str(store.path), group=plan.sweep.name, mode="w-", compute=False, zarr_format=3,
                       consolidated=False, encoding=encoding)
            import zarr

            group = zarr.open_group(str(store.path), mode="r+", path=plan.sweep.name, zarr_format=3)
            group.attrs.update(attrs)
        return cls(store, plan.sweep.name)

    # -- identity and growth --------------------------------------------------------------------
    def check_identity(self, plan):
        stored = self.attrs["identity"]
        if stored == plan.identity and self.dims == plan.dims:
            return
        differs = sorted(k for k in set(stored) | set(plan.identity) if stored.get(k) != plan.identity.get(k))
        if stored.get("settings") != plan.identity.get("settings"):
            keys = set(stored.get("settings", {})) | set(plan.identity["settings"])
            differs = [f"method.{k}" for k in sorted(keys)
                       if stored.get("settings", {}).get(k) != plan.identity["settings"].get(k)] + \
                      [k for k in differs if k != "settings"]
        what = ", ".join(differs) or "grid dims"
        raise StoreError(f"{self.store.path}/{self.name}",
                         f"holds this sweep computed with different {what}; nothing was overwritten",
                         "store the new settings under another name (--name NEW) or another --store")

    def extend(self, plan):
        """Add grid values the plan asks for that the group lacks (resize, data first, coord last)."""
        for axis, dim in enumerate(self.dims):
            new = [v for v in plan.coords[dim] if _key(v) not in self._index[dim]]
            if not new:
                continue
            old_n = len(self.coords[dim])
            new_n = old_n + len(new)
            with _quiet():
                for name in list(LEDGER) + self.variables:
                    arr = self.group[name]
                    shape = list(arr.shape)
                    shape[axis] = new_n
                    arr.resize(tuple(shape))
                coord = self.group[dim]
                coord.resize((new_n,))
                coord[old_n:] = _coord_array(new).astype(coord.dtype)
            self.coords[dim] = self.group[dim][:]
            self._index[dim] = {_key(v): i for i, v in enumerate(self.coords[dim])}

    def _repair_interrupted_extension(self):
        for axis, dim in enumerate(self.dims):
            coord = self.group[dim]
            values = coord[:]
            valid = len(values)
            # A coordinate resized but never filled ends in fill values: those slots were never written.
            while valid and ((values.dtype.kind == "f" and np.isnan(values[valid - 1])) or
                             (values.dtype.kind == "U" and values[valid - 1] == "")):
                valid -= 1
            with _quiet():
                if valid < len(values):
                    coord.resize((valid,))
                for name in list(LEDGER) + list(self.variables):
                    arr = self.group[name]
                    if arr.shape[axis] > valid:
                        shape = list(arr.shape)
                        shape[axis] = valid
                        arr.resize(tuple(shape))

    def update_spec(self, plan):
        self.group.attrs.update({"spec": plan.sweep.text, "spec_source": plan.sweep.source,
                                 "plot": json.dumps(plan.sweep.plot),
                                 "spec_resolved": json.dumps(plan.sweep.resolved()), "updated_at": now_iso()})

    # -- ledger ---------------------------------------------------------------------------------
    def index_of(self, point):
        try:
            return tuple(self._index[d][_key(v)] for d, v in point.coords)
        except KeyError:
            raise StoreError(self.name, f"point {point.params} is not on the stored grid",
                             "rerun the sweep (it extends the grid)") from None

    def ledger(self):
        """status and point_hash over the whole grid (one small read per point)."""
        with _quiet():
            return self.group["status"][...], self.group["point_hash"][...]

    def mark_pending(self, cells):
        """Mark (index, hash) cells as requested-but-not-done before they are submitted."""
        status, _ = self.ledger()
        with _quiet():
            for index, hash_ in cells:
                if status[index] != DONE:
                    self.group["point_hash"][index] = hash_
                    self.group["status"][index] = PENDING

    def write_point(self, index, point_hash, data, meta):
        """Data first, ledger second, done flag last."""
        with _quiet():
            for name, value in data.items():
                self.group[name][index] = value
            self._write_meta(index, meta, error="")
            self.group["point_hash"][index] = point_hash
            self.group["status"][index] = DONE

    def write_failure(self, index, point_hash, reason, meta=None):
        with _quiet():
            self._write_meta(index, meta or {}, error=reason[:ERROR_WIDTH])
            self.group["point_hash"][index] = point_hash
            self.group["status"][index] = FAILED

    def _write_meta(self, index, meta, error):
        self.group["error"][index] = error
        self.group["attempts"][index] = int(self.group["attempts"][index]) + 1
        self.group["finished_at"][index] = _dt.datetime.now(_dt.timezone.utc).timestamp()
        for key in ("runtime_s", "host", "worker", "slurm_job_id"):
            if key in meta and meta[key] is not None:
                self.group[key][index] = meta[key]

    # -- runs -----------------------------------------------------------------------------------
    def start_run(self, info):
        runs = list(self.group.attrs.get("runs", []))
        runs.append({"started_at": now_iso(), **info})
        self.group.attrs.update({"runs": runs, "updated_at": now_iso()})
        return len(runs) - 1

    def finish_run(self, run_index, info):
        runs = list(self.group.attrs.get("runs", []))
        runs[run_index].update({"finished_at": now_iso(), **info})
        self.group.attrs.update({"runs": runs, "updated_at": now_iso()})

    def cell_params(self, index):
        """The grid coordinates of a cell, as plain Python values."""
        return {d: _python(self.coords[d][i]) for d, i in zip(self.dims, index)}


def _key(value):
    """Lookup key of a coordinate value (floats are canonical, so exact equality is right)."""
    if isinstance(value, (str, np.str_)):
        return ("s", str(value))
    return ("f", float(value))


def _python(value):
    if isinstance(value, (np.str_, str)):
        return str(value)
    return float(value)


def _coord_array(values):
    if any(isinstance(v, (str, np.str_)) for v in values):
        return np.array([str(v) for v in values], dtype="U64")
    return np.array([float(v) for v in values], dtype="f8")


def _fill(dtype):
    kind = np.dtype(dtype).kind
    if kind == "f":
        return np.nan
    if kind == "U":
        return ""
    return 0
