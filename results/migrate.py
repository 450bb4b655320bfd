"""`seqphase migrate`: convert layout-1 sweep groups (one chunk per point, no checksums) to layout 2.

The new group is written beside the old one (`.NAME.migrating`), array by array, a block of new chunks
at a time (values copied as they are: bit for bit), with the chunking of a new group
(`store.grid_chunks`) and a crc32c on every chunk. Only then is it swapped in: the old group is renamed
`.NAME.layout1-old`, the new one renamed NAME, the old one deleted. A migration killed before the swap
leaves the old group untouched (the next migrate starts over); one killed between the two renames is
finished by the next migrate. Chunks of the old group that cannot be decoded are written as fill values
and their points set back to pending, so `seqphase run` recomputes them.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np

from seqphase.results.conventions import _write_json, long_name, old_names
from seqphase.results.manifest import Manifest, manifest_path
from seqphase.results.safe_io import loads_json, read_text
from seqphase.results.store import (LAYOUT, LEDGER, NOT_REQUESTED, PENDING, SweepGroup, _quiet, codecs,
                                    grid_chunks)


def migrate_group(store, name):
    """Convert one group; returns (points, files before, files after), or None if it is already layout 2."""
    import zarr

    tmp, old_copy = store.path / f".{name}.migrating", store.path / f".{name}.layout1-old"
    folder = store.path / name
    if not folder.exists() and old_copy.exists() and tmp.exists():
        os.rename(tmp, folder)  # killed between the two renames: finish
    if old_copy.exists() and folder.exists():
        shutil.rmtree(old_copy)
    group = SweepGroup(store, name)
    if group.layout >= LAYOUT:
        return None
    if tmp.exists():
        shutil.rmtree(tmp)
    from seqphase.results.verify import damaged_mask, find_damage

    damages = find_damage(group, thorough=True)
    if any(d.array in group.dims for d in damages):
        from seqphase.core.errors import StoreError

        raise StoreError(str(folder), "a grid coordinate is damaged; it cannot be migrated",
                         "restore the group from a copy; nothing was written")
    files_before = sum(1 for p in folder.rglob("*") if p.is_file())
    ndim = len(group.dims)
    with _quiet():
        new_group = zarr.open_group(str(store.path), path=tmp.name, mode="w-", zarr_format=3)
        new_group.attrs.update({**group.attrs, "store_layout": LAYOUT})
        for array in group.group.array_keys():
            old = group.group[array]
            per_point = array in LEDGER or array in group.variables
            if per_point:
                extra = tuple(old.shape[ndim:])
                chunks = grid_chunks(old.shape[:ndim], old.dtype.itemsize * int(np.prod(extra))) + extra
            else:
                chunks = tuple(max(1, n) for n in old.shape)
            new = new_group.create_array(array, shape=old.shape, dtype=old.dtype, chunks=chunks,
                                         compressors=codecs(), fill_value=old.fill_value,
                                         dimension_names=old.metadata.dimension_names,
                                         attributes=old.attrs.asdict())
            group.arrays.setdefault(array, old)
            from seqphase.results.verify import chunk_regions

            for _, selection in chunk_regions(new):
                new[selection] = group.read_block(array, selection)
    moved = SweepGroup(store, tmp.name)
    mask = damaged_mask(moved.grid_shape, damages)
    status = moved.read("status")
    cells = [tuple(int(i) for i in index) for index in zip(*(mask & (status != NOT_REQUESTED)).nonzero())]
    with _quiet():
        moved.writer()._apply("status", [(index, PENDING) for index in cells])
    manifest_path(folder).unlink(missing_ok=True)  # it lists the old chunks; a new one is written below
    os.rename(folder, old_copy)
    os.rename(tmp, folder)
    shutil.rmtree(old_copy)
    manifest = Manifest.new(folder, moved.attrs, complete=True)  # the group was just written whole
    arrays = list(moved.group.array_keys())
    manifest.adopt_metadata(arrays)
    manifest.reconcile(arrays)
    manifest.save()
    files_after = sum(1 for p in folder.rglob("*") if p.is_file())
    return int(np.prod(moved.grid_shape)), files_before, files_after, len(cells)


def require_current_names(store, name):
    """Refuse (StoreError) to run into a group that still holds old variable names: nothing written."""
    from seqphase.core.errors import StoreError
    from seqphase.results.store import SweepGroup

    if not (store.path / name / "zarr.json").is_file():
        return
    stale = old_names(SweepGroup(store, name, repair=False))
    if stale:
        old, new = stale[0]
        raise StoreError(f"{store.path}/{name}", f"holds variable {old!r}, now named {new!r}",
                         f"run `seqphase migrate {name} --store {store.path}` first (renames it; values unchanged)")


def migrate_names(store, name):
    """Rename a group's old variables on disk (array folders, the `variables` attribute, consolidated
    metadata dropped first); values are not touched. Returns the [(old, new)] renamed."""
    import zarr

    from seqphase.results.store import SweepGroup, _quiet

    group = SweepGroup(store, name)
    stale = old_names(group)
    if not stale:
        return []
    store.unconsolidate(name)
    table = dict(stale)
    for old, new in stale:
        os.rename(group.folder / old, group.folder / new)
        meta_file = group.folder / new / "zarr.json"
        meta = loads_json(read_text(meta_file, "metadata", below=group.folder))
        attrs = meta.setdefault("attributes", {})
        attrs.setdefault("long_name", long_name(attrs.get("doc", new)))
        attrs.setdefault("units", "1")
        _write_json(meta_file, meta)
    with _quiet():
        root = zarr.open_group(str(store.path), mode="r+", path=name, zarr_format=3, use_consolidated=False)
        root.attrs.update({"variables": [table.get(v, v) for v in group.variables]})
    return stale
