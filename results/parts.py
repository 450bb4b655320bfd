"""Finished works of points that are not stored yet.

A point cut into several tasks (its seeds, Monte-Carlo blocks, search probes: `core.models.Work`) is
stored when all its works are in. Until then the driver keeps each finished work's result here, one
file per work, so a killed driver (or a point that failed on one seed) loses only the works that were
in flight: the next run (`run` or `retry-failed`) loads them, submits only the missing works, and
removes the point's files once the point is stored. Each file holds the work's result with its metadata
(`Kept`: the runtime, host and worker it ran on), so a point assembled across several runs still stores the
time of all its works (`runtime_s`); a file of an earlier layout holds the bare result and loads with no
metadata (its time is unknown).

Layout: <store>/.seqphase-parts/<sweep>/<point hash>/<work key>.pkl. The point hash names everything
that determines the result (parameters, settings, seed, algorithm version), so a file is only ever
reused by the same computation. Each file is written to a temporary name, flushed to disk and renamed;
a file that cannot be read back (truncated by a crash) is dropped and its work recomputed. The folder
starts with a dot: no zarr node and no sweep, invisible to readers of the store.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
from pathlib import Path
from typing import NamedTuple

FOLDER = ".seqphase-parts"
_SAFE = re.compile(r"^[A-Za-z0-9_.+-]+$")


class Kept(NamedTuple):
    """One kept work as written to its file: the result and the work's metadata ({"runtime_s": ..., "host":
    ...}; None where it is not known)."""

    result: object
    meta: dict | None


class Parts:
    def __init__(self, store_path, sweep):
        self.root = Path(store_path) / FOLDER / sweep

    def _folder(self, point_hash):
        return self.root / point_hash

    def load(self, point_hash):
        """{work key: result} of the works of the point finished by earlier runs."""
        return {key: kept.result for key, kept in self.load_kept(point_hash).items()}

    def load_kept(self, point_hash):
        """{work key: Kept(result, meta)} of the works of the point finished by earlier runs (meta None for a
        file written before the metadata was kept)."""
        folder = self._folder(point_hash)
        if not folder.is_dir():
            return {}
        found = {}
        for path in folder.glob("*.pkl"):
            try:
                with open(path, "rb") as handle:
                    value = pickle.load(handle)
            except Exception:  # noqa: BLE001 -- a truncated or unreadable file: recompute that work
                path.unlink(missing_ok=True)
                continue
            found[path.stem] = value if isinstance(value, Kept) else Kept(value, None)
        return found

    def save(self, point_hash, key, result, meta=None):
        """Keep one finished work: its result and its metadata (the driver's: runtime_s, host, worker)."""
        if not _SAFE.match(key):
            raise ValueError(f"work key {key!r} is not a safe file name")
        folder = self._folder(point_hash)
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"{key}.pkl"
        temporary = folder / f".{key}.{os.getpid()}.tmp"
        with open(temporary, "wb") as handle:
            pickle.dump(Kept(result, meta), handle, protocol=pickle.HIGHEST_PROTOCOL)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, final)

    def drop(self, point_hash):
        shutil.rmtree(self._folder(point_hash), ignore_errors=True)
        for folder in (self.root, self.root.parent):  # and the sweep's and the store's folder once empty
            try:
                folder.rmdir()
            except OSError:
                break

    def points(self):
        """Hashes of the points that have kept works."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    def counts(self):
        """{point hash: number of kept works} (what `seqphase status` reports of points still running)."""
        return {h: sum(1 for _ in (self.root / h).glob("*.pkl")) for h in self.points()}

    def prune(self, stored_hashes):
        """Drop the kept works of points that are stored (e.g. a driver killed between storing a point
        and removing its files)."""
        for point_hash in self.points():
            if point_hash in stored_hashes:
                self.drop(point_hash)
