"""The zarr store: one group per sweep, one labelled xarray Dataset per group, one writer.

Layout of a sweep group (readable with plain `xarray.open_zarr(store, group=name)`):
- grid dims: every model parameter (length 1 when fixed) and the method's own axes; a chunk holds a
  block of many points (sized from the grid and the point's bytes, `grid_chunks`), and the extra dims
  of the method (seed, iteration, row, col, ...) are whole inside it. Every chunk ends in a crc32c
  checksum (zarr's crc32c codec after zstd), so damage is detected (`results/verify.py`). Groups
  written before this layout (attribute `store_layout` absent: one chunk per point, no checksums)
  stay readable and writable; `seqphase migrate` converts them;
- the model's output variables over (grid dims + their extra dims), NaN until written;
- the ledger over the grid dims: `status` (0 not requested, 1 pending, 2 done, 3 failed), `point_hash`,
  `error`, `runtime_s`, `finished_at`, `attempts`, `host`, `worker`, `slurm_job_id`;
- attrs: provenance (versions, git revision, host, spec, identity) and the list of runs.

Only the driver writes (workers return results): concurrent writers that share chunks silently lose
rows (spec storage-and-execution.md section 3), and a single writer cannot. The driver writes finished
points in batches, chunk by chunk (`results/writer.py`): data first, ledger next, the done flags last,
each chunk file replaced atomically and durably (`results/durable.py`: temporary file, fsync, rename,
fsync of the directory), so a crash at any moment, of the driver or of the node, leaves the points of
the unfinished batch pending, recomputed by the next run. A manifest per group (`results/manifest.py`)
lists every chunk written, so a chunk that is gone is damage, not fill.
Consolidated metadata (root and groups) is written at the end of every run and removed before a run
changes anything, so it is never stale. The grid grows (new parameter values are new points) by resizing along a dim, data
arrays first and the coordinate last; an interrupted extension is rolled back on the next open.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

from seqphase.core.errors import StoreError
from seqphase.results.conventions import coordinate_attrs, ledger_attrs, variable_attrs
from seqphase.results.safe_io import loads_json, read_text, refuse_special
from seqphase.results.schema import (  # noqa: F401  (re-exported: the store's public names)
    CHUNK_BYTES, CHUNK_POINTS, DEFAULT_STORE, DONE, ERROR_WIDTH, FAILED, LAYOUT, LEDGER, NOT_REQUESTED, PENDING,
    STATUS_NAMES, STORE_FORMAT, _quiet, _short, codecs, default_store, now_iso)


def grid_chunks(grid_shape, point_bytes):
    """Chunk shape over the grid dims for an array of `point_bytes` per point: a C-ordered block (points
    finish roughly in plan order, so a batch fills few chunks) of at most CHUNK_POINTS points and
    CHUNK_BYTES bytes, trailing dims whole first."""
    budget = max(1, min(CHUNK_POINTS, CHUNK_BYTES // max(1, int(point_bytes))))
    chunks = [1] * len(grid_shape)
    for axis in reversed(range(len(grid_shape))):
        size = max(1, int(grid_shape[axis]))
        chunks[axis] = min(size, budget)
        budget //= size
        if budget < 1:
            break
    return tuple(chunks)


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
        self.path = Path(path or default_store())

    # -- validation -----------------------------------------------------------------------------
    def check(self, create=False, allow_missing=False):
        """Raise StoreError unless the path is a seqphase store (or absent/empty: then create it if
        `create`, accept it if `allow_missing`)."""
        root_meta = self.path / "zarr.json"
        _refuse_under_file(self.path)
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
            meta = loads_json(read_text(root_meta, "metadata", below=self.path))
        except (OSError, ValueError) as exc:
            raise StoreError(str(self.path), f"corrupted store metadata ({_short(exc)})",
                             "restore the store from a copy or choose another --store path; nothing was written")
        attrs = meta.get("attributes", {}) if isinstance(meta, dict) else {}
        if not isinstance(attrs, dict) or meta.get("node_type") != "group" or "seqphase_store_format" not in attrs:
            raise StoreError(str(self.path), "is a zarr store written by something else (no seqphase_store_format)",
                             "choose another --store path; nothing was written")
        found = attrs["seqphase_store_format"]
        if isinstance(found, bool) or not isinstance(found, int):
            raise StoreError(str(root_meta), f"corrupted store metadata (store format {found!r} is not a number)",
                             "restore the store from a copy or choose another --store path; nothing was written")
        if attrs["seqphase_store_format"] > STORE_FORMAT:
            raise StoreError(str(self.path), f"store format {attrs['seqphase_store_format']} is newer than "
                             f"this seqphase ({STORE_FORMAT})", "upgrade seqphase")
        return self

    def _create_root(self):
        import zarr

        from seqphase.results.durable import DurableStore

        with _quiet():
            root = zarr.open_group(DurableStore(self.path), mode="a", zarr_format=3)
            root.attrs.update({"seqphase_store_format": STORE_FORMAT, "created_at": now_iso()})
        return self

    def check_unlocked(self):
        """Refuse (StoreError) while another driver holds the lock; takes nothing, writes nothing."""
        from seqphase.results.lock import check_unlocked

        check_unlocked(self.path)

    def preflight(self, plan):
        """Everything a run would refuse, checked before any cluster starts: a foreign or corrupted
        store, a lock held by another driver, unreadable metadata or other settings in the sweep's group."""
        self.check(allow_missing=True)
        self.check_unlocked()
        if (self.path / plan.sweep.name / "zarr.json").is_file():
            SweepGroup(self, plan.sweep.name, repair=False).check_identity(plan)
        return self

    # -- consolidated metadata ------------------------------------------------------------------
    def consolidate(self):
        """Consolidate the metadata of the whole store (root and every group), so that plain
        `xr.open_zarr(store, group=NAME)` and `xr.open_zarr(store/NAME)` open quietly and fast. Returns
        '' or the reason it could not (another group's metadata is broken: reported, not fatal)."""
        import zarr

        from seqphase.results.durable import DurableStore

        zstore = DurableStore(self.path)  # other groups are read too: through safe_io, like every read
        try:
            with _quiet():
                for name in self.sweep_names():  # each group's own zarr.json (xr.open_zarr(store/NAME))
                    zarr.consolidate_metadata(zstore, path=name, zarr_format=3)
                zarr.consolidate_metadata(zstore, zarr_format=3)  # xr.open_zarr(store, group=NAME)
        except Exception as exc:  # noqa: BLE001 -- a broken group elsewhere must not fail this run
            return f"{type(exc).__name__}: {exc}"
        return ""

    def unconsolidate(self, *groups):
        """Drop the consolidated metadata of the root (and of `groups`) before anything changes, so a
        reader never sees stale shapes or attributes; `consolidate` writes it again at the end."""
        for folder in (self.path,) + tuple(self.path / g for g in groups):
            _drop_consolidated(folder / "zarr.json")

    @contextlib.contextmanager
    def lock(self):
        """One driver per store at a time: an O_EXCL lock file with a heartbeat (results/lock.py); a
        killed driver's lock is taken over by the next one (dead pid on this host, or no heartbeat)."""
        from seqphase.results.lock import hold

        self.path.mkdir(parents=True, exist_ok=True)
        with hold(self.path):
            yield self

    # -- groups ---------------------------------------------------------------------------------
    def sweep_names(self):
        self.check()
        return sorted(p.name for p in self.path.iterdir()
                      if (p / "zarr.json").is_file() and not p.name.startswith(".") and _valid_name(p.name))

    def open_sweep(self, name, write=False):
        """The sweep's group, read-only unless `write` (then the caller holds the lock): a read-only group
        is opened without changing a byte of the store."""
        check_name(name)
        self.check()
        if not (self.path / name / "zarr.json").is_file():
            known = ", ".join(self.sweep_names()) or "none"
            raise StoreError(name, f"no results for this sweep in {self.path} (stored: {known})",
                             f"run it first: seqphase run {name} --store {self.path}")
        return SweepGroup(self, name, repair=write)

    def prepare(self, plan):
        """Create the sweep's group (template written once) or check and extend the existing one."""
        self.check(create=True)
        name = plan.sweep.name
        check_name(name)
        refuse_links(self.path, name)
        self.unconsolidate(name)
        if (self.path / name / "zarr.json").is_file():
            group = SweepGroup(self, name)
            group.check_identity(plan)
            group.start_manifest()
            group.restore_lost_arrays()
            group.extend(plan)
            group.repair_damage()
        else:
            group = SweepGroup.create(self, plan)
        group.update_spec(plan)
        return group


class SweepGroup:
    """One sweep's group: the ledger, region writes of single points, and grid extension."""

    def __init__(self, store, name, repair=True):
        """`repair` (a writer holding the lock): roll back an interrupted grid extension. Without it the
        group is opened read-only and nothing is written; a grid caught mid-extension is refused."""
        import zarr

        from seqphase.results.durable import DurableStore
        from seqphase.results.manifest import Manifest

        self.store, self.name = store, name
        self.folder = store.path / name
        self.repaired = {}  # damaged chunks reset by repair_damage(): {(array, chunk): reason}
        self.damaged_cells = 0
        where = f"{store.path}/{name}"
        migrating = name.startswith(".") and name.endswith(".migrating")  # `seqphase migrate`: .NAME.migrating
        check_name(name[1:-len(".migrating")] if migrating else name)
        meta_file = self.folder / "zarr.json"
        refuse_special(self.folder, where)  # links and special files anywhere in the group: nothing is opened
        _parse_metadata(meta_file, where)
        self.zstore = DurableStore(store.path)  # durable, journaled writes (results/durable.py)
        with _quiet():
            try:
                self.group = zarr.open_group(self.zstore, mode="r+" if repair else "r", path=name, zarr_format=3,
                                             use_consolidated=False)
            except Exception as exc:  # zarr raises several types for broken metadata
                raise StoreError(str(meta_file), f"corrupted sweep group metadata ({_short(exc)})",
                                 _restore_fix(meta_file, where)) from None
        attrs = self.group.attrs.asdict()
        for key in ("seqphase_sweep", "model", "method", "point_dims", "identity", "variables"):
            if key not in attrs:
                raise StoreError(where, f"not a seqphase sweep group (missing attribute {key!r})",
                                 "choose another --name or --store; nothing was written")
        self.attrs = attrs
        self.layout = _attr_int(attrs, "store_layout", 1, where)
        self.dims = _attr_names(attrs, "point_dims", where)
        self.variables = _attr_names(attrs, "variables", where)
        _check_runs(attrs.get("runs", []), where)
        _check_json_attrs(attrs, where)
        _check_attr_types(attrs, where)
        self.manifest = Manifest.load(self.folder, attrs)  # None: written before manifests (or by no run yet)
        self.lost = set()  # arrays whose folder is gone (the manifest knows their metadata and chunks)
        self.arrays = {}
        for array in self.dims + list(LEDGER) + self.variables:
            if not (self.folder / array / "zarr.json").is_file():
                if array in self.dims or self.manifest is None or array not in self.manifest.metadata:
                    raise StoreError(where, f"corrupted sweep group (array {array!r} is missing)",
                                     "restore it from a copy or run under another --name; nothing was written")
                self.lost.add(array)
                self.arrays[array] = _placeholder(self.manifest.metadata[array])
                continue
            self.arrays[array] = _open_array(self.group, array, self.folder, where)
        self._check_coordinates(where)
        _check_sizes(self.arrays, self.dims, where)
        _check_dimension_names(self.arrays, self.dims, where)
        self.extra = _extra_coordinates(self.group, self.folder, self.arrays, self.dims, where)
        if repair:
            self._repair_interrupted_extension()
        self.coords = {}
        for d in self.dims + sorted(self.extra):  # (the method's own coordinates too: readers label rows by them)
            try:
                with _quiet():
                    values = self.arrays[d][:] if d in self.dims else self.extra[d][:]
            except Exception as exc:  # a damaged coordinate chunk: the grid itself is unknown
                raise StoreError(f"{where}/{d}", f"damaged coordinate data ({_short(exc)})",
                                 f"restore {self.folder / d} from a copy, or move {where} aside and rerun "
                                 "the sweep; nothing was written") from None
            if d not in self.dims:
                continue
            self.coords[d] = values
            if not repair and _valid_length(self.coords[d]) < len(self.coords[d]):
                raise StoreError(where, f"its grid is being extended (coordinate {d!r} ends in unwritten values): "
                                 "a run is under way, or one was interrupted", f"wait for the run to end, or rerun "
                                 f"`seqphase run {name}` to finish the extension; nothing was written")
        shape = tuple(len(self.coords[d]) for d in self.dims)
        self.grid_shape = shape
        for name_ in list(LEDGER) + self.variables:
            if name_ not in self.lost and tuple(self.arrays[name_].shape[: len(self.dims)]) != shape:
                if not repair:
                    raise StoreError(where, f"its grid is being extended (array {name_!r} has shape "
                                     f"{self.arrays[name_].shape[: len(self.dims)]}, the grid is {shape}): a run is "
                                     "under way, or one was interrupted", f"wait for the run to end, or rerun "
                                     f"`seqphase run {name}` to finish the extension; nothing was written")
                raise StoreError(where, f"corrupted sweep group (array {name_!r} has shape "
                                 f"{self.arrays[name_].shape}, grid is {shape})",
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
            extra_shape = tuple(len(extra[d]) for d in var.dims)
            shape = grid_shape + extra_shape
            chunks = grid_chunks(grid_shape, np.dtype(var.dtype).itemsize * int(np.prod(extra_shape))) + extra_shape
            fill = _fill(var.dtype)
            data_vars[name] = (dims + list(var.dims), da.full(shape, fill, dtype=var.dtype, chunks=chunks),
                               variable_attrs(var))
            encoding[name] = {"chunks": chunks, "compressors": codecs()}
        for name, (dtype, fill, doc) in LEDGER.items():
            chunks = grid_chunks(grid_shape, np.dtype(dtype).itemsize)
            data_vars[name] = (dims, da.full(grid_shape, fill, dtype=dtype, chunks=chunks), ledger_attrs(name, doc))
            encoding[name] = {"chunks": chunks, "compressors": codecs()}
        for name in list(coords) + list(extra):
            encoding[name] = {"compressors": codecs()}
        ds = xr.Dataset(data_vars, coords={**coords, **{k: v for k, v in extra.items()}})
        for name in ds.coords:
            ds[name].attrs.update(coordinate_attrs(name, ds[name].dtype, plan.model.params.get(name)))
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
            "store_layout": LAYOUT,
        }
        ds.attrs.update({k: v for k, v in attrs.items() if isinstance(v, (str, int, float))})
        with _quiet():
            from seqphase.results.durable import DurableStore
            from seqphase.results.manifest import Manifest

            zstore = DurableStore(store.path)
            ds.to_zarr(zstore, group=plan.sweep.name, mode="w-", compute=False, zarr_format=3,
                       consolidated=False, encoding=encoding)
            import zarr

            group = zarr.open_group(zstore, mode="r+", path=plan.sweep.name, zarr_format=3)
            group.attrs.update(attrs)
            manifest = Manifest.new(store.path / plan.sweep.name, attrs, complete=True)
            manifest.apply(*zstore.take(), prefix=plan.sweep.name + "/")
            manifest.save()
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
            self._reopen_arrays()
            self.coords[dim] = self.arrays[dim][:]
            self.grid_shape = tuple(len(self.coords[d]) for d in self.dims)
            self._index[dim] = {_key(v): i for i, v in enumerate(self.coords[dim])}
            self.save_manifest()

    def _repair_interrupted_extension(self):
        for axis, dim in enumerate(self.dims):
            coord = self.group[dim]
            values = coord[:]
            valid = _valid_length(values)
            with _quiet():
                shrink = [name for name in list(LEDGER) + list(self.variables)
                          if name not in self.lost and self.group[name].shape[axis] > valid]
                if valid < len(values) or shrink:
                    self.store.unconsolidate(self.name)
                if valid < len(values):
                    coord.resize((valid,))
                for name in shrink:
                    arr = self.group[name]
                    shape = list(arr.shape)
                    shape[axis] = valid
                    arr.resize(tuple(shape))
        self._reopen_arrays()
        if self.zstore.written or self.zstore.deleted:
            self.save_manifest()

    def _reopen_arrays(self):
        with _quiet():
            self.arrays = {name: arr if name in self.lost else _writable(self.group[name])
                           for name, arr in self.arrays.items()}

    # -- manifest (results/manifest.py) ---------------------------------------------------------
    def _check_coordinates(self, where):
        """A grid coordinate chunk that was written and is gone: the grid itself is unknown (and its
        NaN would read as an interrupted extension). One line, nothing written."""
        if self.manifest is None:
            return
        for d in self.dims:
            if self.manifest.missing(d):
                raise StoreError(f"{where}/{d}", "damaged coordinate data (a chunk file written by a run is gone)",
                                 f"restore {self.folder / d} from a copy, or move {where} aside and rerun the sweep; "
                                 "nothing was written")

    def save_manifest(self):
        """Fold what the store wrote since the last save into the manifest and save it (durably)."""
        written, deleted = self.zstore.take()
        if self.manifest is None:
            return
        self.manifest.apply(written, deleted, prefix=self.name + "/")
        self.manifest.save()

    def restore_lost_arrays(self):
        """Recreate the metadata of array folders that are gone, from the manifest's copy; their chunks
        stay listed, so `repair_damage` finds them missing and sets their points pending."""
        from seqphase.results.durable import write_file

        for name in sorted(self.lost):
            write_file(self.folder / name / "zarr.json", json.dumps(self.manifest.metadata[name], indent=2).encode())
            self.lost.discard(name)
            with _quiet():
                self.arrays[name] = _writable(self.group[name])

    def start_manifest(self):
        """Before a run writes: start a manifest on a group that has none (written before manifests:
        `complete` false), and take in chunk files written after the last save (a stopped driver)."""
        from seqphase.results.manifest import Manifest

        arrays = list(self.arrays)
        if self.manifest is None:
            self.manifest = Manifest.new(self.folder, self.attrs, complete=False)
            self.manifest.adopt_metadata(arrays)
            self.manifest.reconcile(arrays)
            self.save_manifest()
        elif self.manifest.reconcile(arrays):
            self.save_manifest()

    def update_spec(self, plan):
        self.group.attrs.update({"spec": plan.sweep.text, "spec_source": plan.sweep.source,
                                 "plot": json.dumps(plan.sweep.plot),
                                 "spec_resolved": json.dumps(plan.sweep.resolved()), "updated_at": now_iso()})
        if getattr(plan, "plugins", None):  # the user plug-ins the grid names: module, class, file, hash
            self.group.attrs["plugins"] = json.dumps(plan.plugins)

    # -- ledger ---------------------------------------------------------------------------------
    def index_of(self, point):
        try:
            return tuple(self._index[d][_key(v)] for d, v in point.coords)
        except KeyError:
            raise StoreError(self.name, f"point {point.params} is not on the stored grid",
                             "rerun the sweep (it extends the grid)") from None

    def ledger(self):
        """status and point_hash over the whole grid (cells of unreadable chunks read as fill)."""
        return self.read("status"), self.read("point_hash")

    def read(self, name):
        """A whole per-point array; a chunk that cannot be read comes back as fill values (the damage
        itself is found and reported by `results/verify.py`)."""
        arr = self.arrays[name]
        try:
            with _quiet():
                return arr[...]
        except Exception:  # noqa: BLE001 -- read what can be read, chunk by chunk
            pass
        from seqphase.results.verify import chunk_regions

        out = np.full(arr.shape, arr.fill_value, dtype=arr.dtype)
        for _, selection in chunk_regions(arr):
            out[selection] = self.read_block(name, selection)
        return out

    def read_block(self, name, selection):
        """A block of an array (a writable copy); the chunks in it that cannot be read come back as fill
        values (a damaged chunk is overwritten whole by the writer)."""
        arr = self.arrays[name]
        try:
            with _quiet():
                return np.array(arr[selection])
        except Exception:  # noqa: BLE001 -- read the block chunk by chunk
            pass
        bounds = [range(*s.indices(n))[::1] for s, n in zip(selection, arr.shape)]
        block = np.full(tuple(len(b) for b in bounds), arr.fill_value, dtype=arr.dtype)
        ranges = [range(b.start // c, -(-b.stop // c)) for b, c in zip(bounds, arr.chunks)]
        for chunk in itertools.product(*ranges):
            part = tuple(slice(max(i * c, b.start), min((i + 1) * c, b.stop))
                         for i, c, b in zip(chunk, arr.chunks, bounds))
            try:
                with _quiet():
                    values = arr[part]
            except Exception:  # noqa: BLE001 -- this chunk is damaged
                continue
            block[tuple(slice(p.start - b.start, p.stop - b.start) for p, b in zip(part, bounds))] = values
        return block

    def read_where(self, name, mask):
        """{grid index: value} of a per-point array at the cells of `mask`, reading only their chunks."""
        from seqphase.results.verify import chunk_regions

        out = {}
        arr = self.arrays[name]
        for _, selection in chunk_regions(arr):
            sub = mask[selection]
            if sub.any():
                block = self.read_block(name, selection)
                for local in zip(*sub.nonzero()):
                    out[tuple(s.start + i for s, i in zip(selection, local))] = block[local]
        return out

    def writer(self):
        from seqphase.results.writer import BatchWriter

        return BatchWriter(self)

    def mark_pending(self, cells):
        """Mark (index, hash) cells as requested-but-not-done before they are submitted."""
        self.writer().mark_pending(cells)

    def write_point(self, index, point_hash, data, meta):
        """One point (data first, ledger second, done flag last); the driver batches with `writer()`."""
        writer = self.writer()
        writer.done(index, point_hash, data, meta)
        writer.flush()

    def write_failure(self, index, point_hash, reason, meta=None):
        writer = self.writer()
        writer.failed(index, point_hash, reason, meta)
        writer.flush()

    # -- damage ---------------------------------------------------------------------------------
    def repair_damage(self):
        """Before a run: find chunks whose checksum fails or that the manifest lists and are gone (an
        array folder that is gone is recreated from the manifest's copy of its metadata), delete them,
        and set every point they cover back to pending, so the run recomputes exactly those points (and
        the writer rewrites the chunks). Layout-1 groups have no checksums: `seqphase verify` decodes
        them, `seqphase migrate` converts."""
        from seqphase.results.verify import damaged_points, find_damage

        self.restore_lost_arrays()
        damages = find_damage(self, thorough=False)
        if not damages:
            return 0
        for damage in damages:
            damage.file(self).unlink(missing_ok=True)
            if self.manifest is not None:
                self.manifest.forget(damage.array, damage.chunk)
        cells = [tuple(int(i) for i in index) for index in zip(*damaged_points(self, damages).nonzero())]
        writer = self.writer()
        with _quiet():
            writer._apply("status", [(index, PENDING) for index in cells])
        self.save_manifest()
        self.repaired = {(d.array, d.chunk): d.reason for d in damages}
        self.damaged_cells = len(cells)
        return len(cells)

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


def _valid_length(values):
    """Length of a coordinate without its tail of fill values (slots resized but never written)."""
    valid = len(values)
    while valid and ((values.dtype.kind == "f" and np.isnan(values[valid - 1])) or
                     (values.dtype.kind == "U" and values[valid - 1] == "")):
        valid -= 1
    return valid


# -- what a store may hold: names, paths and sizes are checked before they are used --------------------
_ARRAY_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def _valid_name(name):
    from seqphase.sweeps.spec import NAME_PATTERN

    return isinstance(name, str) and NAME_PATTERN.fullmatch(name) is not None


def check_name(name):
    """SpecError unless `name` is a valid sweep name (no path separators, no '..', no control characters)."""
    if not _valid_name(name):
        from seqphase.core.errors import SpecError

        raise SpecError("SWEEP", f"{name!r} is not a valid sweep name",
                        "use lower-case letters, digits, '-', '_' or '.', starting with a letter or digit")


_GROUP_FIX = "restore the group from a copy, or move it aside; nothing was written"
_ATTR_FIX = "restore the group's zarr.json from a copy, or move the group aside; nothing was written"


def _attr_names(attrs, key, where):
    """The group attribute `key` as a list of array names, each a plain file name (StoreError otherwise)."""
    value = attrs[key]
    names = isinstance(value, list) and all(isinstance(v, str) and _ARRAY_NAME.fullmatch(v) and v not in (".", "..")
                                            for v in value) and len(set(value)) == len(value)
    if not names or (key == "point_dims" and not value):  # (a grid has a dim: every model parameter is one)
        raise StoreError(where, f"corrupted sweep group (attribute {key!r} is not a list of array names)",
                         _ATTR_FIX)
    return list(value)


def _check_runs(runs, where):
    """The group's run records: a list of objects whose measured widths are numbers (StoreError otherwise)."""
    numbers = ("works", "work_s", "chain_s", "longest_work_s")
    if not isinstance(runs, list) or not all(
            isinstance(run, dict) and ("work_s" not in run or all(
                isinstance(run.get(k), (int, float)) and not isinstance(run.get(k), bool) for k in numbers))
            for run in runs):
        raise StoreError(where, "corrupted sweep group (attribute 'runs' is not a list of run records)",
                         _ATTR_FIX)


def _check_json_attrs(attrs, where):
    """The attributes held as JSON text (the resolved spec, the plot table, the settings, the status codes):
    each, when present, a string holding a JSON object (StoreError otherwise)."""
    for key in ("spec_resolved", "plot", "settings", "status_codes"):
        if key not in attrs:
            continue
        try:
            value = loads_json(attrs[key]) if isinstance(attrs[key], str) else None
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise StoreError(where, f"corrupted sweep group (attribute {key!r} is not a JSON object)", _ATTR_FIX)
        if key == "plot":  # companions drawn by `plot`: names of other groups, never paths of spec files
            for role, name in value.items():
                if role.endswith("_sweep") and not _valid_name(name):
                    raise StoreError(where, f"corrupted sweep group (attribute 'plot': {role} = {name!r} is not a "
                                     "sweep name)", _ATTR_FIX)


#: the type of each attribute that commands read, when present
_ATTR_TYPES = {"seqphase_sweep": str, "model": str, "method": str, "title": str, "description": str, "reference": str,
               "spec": str, "spec_source": str, "identity": dict, "identity_hash": str, "algorithm_version": str,
               "created_at": str, "updated_at": str, "provenance": dict, "seed": int}


def _check_attr_types(attrs, where):
    """StoreError unless each attribute of _ATTR_TYPES present has its type."""
    for key, kind in _ATTR_TYPES.items():
        if key in attrs and (not isinstance(attrs[key], kind) or isinstance(attrs[key], bool)):
            raise StoreError(where, f"corrupted sweep group (attribute {key!r} is not {_TYPE_NAMES[kind]})", _ATTR_FIX)


_TYPE_NAMES = {str: "a string", dict: "an object", int: "an integer"}


def _attr_int(attrs, key, default, where):
    value = attrs.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise StoreError(where, f"corrupted sweep group (attribute {key!r} = {value!r} is not a number)",
                         _ATTR_FIX)
    return value


def _refuse_under_file(path):
    """StoreError when a folder above `path` is a file (the store cannot be there)."""
    for parent in Path(path).absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise StoreError(str(path), f"{parent} is a file, not a folder", "give a --store path under a folder")
            return


def refuse_links(store_path, name):
    """Before a run writes: StoreError when anything a run writes under is a symbolic link (a write through
    it would land outside the store) or a special file (a FIFO would hang the run that opens it): the
    group's folder and everything in it, the manifests (.seqphase/) and the kept works (.seqphase-parts/)."""
    from seqphase.results.parts import FOLDER

    store_path = Path(store_path)
    for top in (store_path / name, store_path / ".seqphase", store_path / FOLDER):
        refuse_special(top, f"{store_path}/{name}")


def _extra_coordinates(group, folder, arrays, dims, where):
    """{dim: array} of the coordinates of the method's own dims (seed, iteration, ...), each checked: a plain
    name, not a link, one-dimensional and as long as that dim in the arrays that use it."""
    lengths = {}
    for arr in arrays.values():
        names = getattr(arr.metadata, "dimension_names", None) or ()
        for dim, n in zip(names, arr.shape):
            if dim is not None and dim not in dims:
                lengths.setdefault(dim, set()).add(int(n))
    out = {}
    fix = _GROUP_FIX
    for dim, ns in sorted(lengths.items()):
        if not _ARRAY_NAME.fullmatch(dim) or dim in (".", "..") or len(ns) > 1:
            raise StoreError(where, f"corrupted sweep group (dimension {dim!r} of lengths {sorted(ns)})", fix)
        if (folder / dim / "zarr.json").is_file():
            arr = _open_array(group, dim, folder, where)
            if tuple(arr.shape) != (next(iter(ns)),):
                raise StoreError(f"{where}/{dim}", f"corrupted coordinate (shape {tuple(arr.shape)}, the arrays use "
                                 f"{sorted(ns)})", fix)
            out[dim] = arr
    return out


def _check_sizes(arrays, dims, where):
    """Before anything is read: the grid, the chunks and the bytes of one point that the metadata declares are
    within the limits of `sweeps/limits.py` (StoreError otherwise; nothing allocated)."""
    from seqphase.sweeps.limits import MAX_CHUNKS, MAX_POINT_BYTES, MAX_POINTS

    fix = _GROUP_FIX
    grid = 1
    for d in dims:
        shape = tuple(arrays[d].shape)
        if len(shape) != 1:
            raise StoreError(f"{where}/{d}", f"corrupted coordinate (shape {shape}, not one-dimensional)", fix)
        grid *= shape[0]
    if grid > MAX_POINTS:
        raise StoreError(where, f"declares a grid of {grid:,} points, more than the {MAX_POINTS:,} a sweep may hold",
                         fix)
    for name, arr in arrays.items():
        shape, chunks = tuple(arr.shape), tuple(arr.chunks)
        if len(chunks) != len(shape) or any(int(c) < 1 and int(n) > 0 for n, c in zip(shape, chunks)):
            raise StoreError(f"{where}/{name}", f"corrupted array metadata (chunks {chunks} for shape {shape})", fix)
        chunk_bytes = math.prod(int(c) for c in chunks) * np.dtype(arr.dtype).itemsize
        if chunk_bytes > MAX_POINT_BYTES:  # no run writes a chunk larger than the largest point it may hold
            raise StoreError(f"{where}/{name}", f"declares chunks of {chunk_bytes:,} bytes, more than the "
                             f"{MAX_POINT_BYTES:,} a chunk may hold", fix)
        count = math.prod(-(-int(n) // int(c)) if int(n) else 0 for n, c in zip(shape, chunks))
        if count > MAX_CHUNKS:
            raise StoreError(f"{where}/{name}", f"declares {count:,} chunks, more than the {MAX_CHUNKS:,} an array "
                             "may have", fix)
        if name in dims:
            continue
        point_bytes = math.prod(int(n) for n in shape[len(dims):]) * np.dtype(arr.dtype).itemsize
        if len(shape) < len(dims) or point_bytes > MAX_POINT_BYTES:
            raise StoreError(f"{where}/{name}", f"declares {point_bytes:,} bytes a point (shape {shape}), more than "
                             f"the {MAX_POINT_BYTES:,} a point may hold", fix)
        if math.prod(int(n) for n in shape[:len(dims)]) > MAX_POINTS:
            raise StoreError(f"{where}/{name}", f"declares a grid of shape {shape[:len(dims)]}, more than the "
                             f"{MAX_POINTS:,} points a sweep may hold", fix)


def _check_dimension_names(arrays, dims, where):
    """StoreError unless each coordinate is labelled by its own dim and every other array by the grid's dims
    first (then its own): what xarray builds the Dataset from."""
    for name, arr in arrays.items():
        names = tuple(getattr(arr.metadata, "dimension_names", None) or ())
        wanted = (name,) if name in dims else tuple(dims)
        if names[:len(wanted)] != wanted or (name in dims and len(names) != 1):
            raise StoreError(f"{where}/{name}", f"corrupted array metadata (dimension_names {list(names)}, expected "
                             f"{list(wanted)} first)", _GROUP_FIX)


def _restore_fix(meta_file, where):
    return (f"restore {meta_file} from a copy, or move {where} aside and rerun the sweep to recompute it; "
            "nothing was written")


def _parse_metadata(meta_file, where):
    """The JSON of a zarr.json (a regular file of at most the metadata size, read without following a
    link), or StoreError naming the file."""
    try:
        meta = loads_json(read_text(meta_file, "metadata", below=meta_file.parent.parent))
    except (OSError, ValueError) as exc:
        raise StoreError(str(meta_file), f"corrupted metadata, not readable JSON ({_short(exc)})",
                         _restore_fix(meta_file, where)) from None
    if not isinstance(meta, dict) or meta.get("zarr_format") != 3:
        raise StoreError(str(meta_file), "corrupted metadata (not a zarr v3 document)", _restore_fix(meta_file, where))
    return meta


def _open_array(group, name, folder, where):
    meta_file = folder / name / "zarr.json"
    meta = _parse_metadata(meta_file, where)
    shape, names = meta.get("shape"), meta.get("dimension_names")
    # what xarray needs to label the array: a name for each dim, and attributes that are an object
    if not isinstance(meta.get("attributes", {}), dict) or not isinstance(shape, list) or not isinstance(names, list) \
            or len(names) != len(shape) or not all(isinstance(n, str) for n in names):
        raise StoreError(str(meta_file), "corrupted array metadata (its shape, dimension_names or attributes are "
                         "not what seqphase writes)", _restore_fix(meta_file, where))
    try:
        with _quiet():
            arr = group[name]
    except Exception as exc:  # noqa: BLE001 -- zarr raises several types for invalid metadata
        raise StoreError(str(meta_file), f"corrupted array metadata ({_short(exc)})",
                         _restore_fix(meta_file, where)) from None
    if not hasattr(arr, "shape") or not hasattr(arr, "chunks"):
        raise StoreError(str(meta_file), "corrupted metadata (a group where an array belongs)",
                         _restore_fix(meta_file, where))
    return _writable(arr)


def _writable(arr):
    """The array as the writer uses it: whole chunks are written even when they hold only fill values,
    so a chunk file listed in the manifest is never removed by a write (results/manifest.py)."""
    return arr.with_config({"write_empty_chunks": True})


def _placeholder(meta):
    """An array whose folder is gone, from its metadata (the manifest's copy): reads as fill values."""
    import zarr
    from zarr.core.buffer import default_buffer_prototype
    from zarr.storage import MemoryStore

    memory = MemoryStore()
    memory._store_dict["zarr.json"] = default_buffer_prototype().buffer.from_bytes(json.dumps(meta).encode())
    with _quiet():
        return zarr.open_array(memory, mode="r", zarr_format=3)


def _drop_consolidated(meta_file):
    try:
        meta = loads_json(read_text(meta_file, "metadata", below=meta_file.parent))
    except (OSError, ValueError, StoreError):
        return
    if isinstance(meta, dict) and "consolidated_metadata" in meta:
        del meta["consolidated_metadata"]
        tmp = meta_file.with_name(f".zarr.json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(meta, indent=2))
        os.replace(tmp, meta_file)


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
