"""Damage detection: which chunks of a sweep group cannot be read back, and which points they hold.

Every chunk of a layout-2 group ends in a crc32c of its compressed bytes (zarr's crc32c codec), and
the group's manifest (results/manifest.py) lists every chunk file a run wrote: a listed chunk whose
file is gone is damage ("missing"), an unlisted absent one was never written (fill values). Two
depths of check:
- `fast` (what `seqphase run` does before computing, and `query` before printing): read each chunk
  file's bytes and compare the checksum, no decompression; legacy arrays without a checksum are skipped;
- `thorough` (`seqphase verify`): decode every chunk of every array through zarr, checksum or not,
  coordinates included.

A chunk covers a block of grid cells; every point in a damaged chunk counts as damaged (its values,
or its ledger entry, cannot be trusted), and `SweepGroup.repair_damage` resets them to pending so the
next run recomputes exactly those.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np


MISSING = "missing: written by a run, and the file is gone"


@dataclass(frozen=True)
class Damage:
    array: str
    chunk: tuple          # chunk index over all the array's dims
    region: tuple         # slices over the grid dims that the chunk covers
    reason: str

    def file(self, group):
        return group.folder / self.array / "c" / "/".join(str(i) for i in self.chunk)


def chunk_regions(arr):
    """(chunk index, selection) for every chunk of a zarr array, in C order."""
    shape, chunks = arr.shape, arr.chunks
    counts = [-(-n // c) if n else 0 for n, c in zip(shape, chunks)]
    for index in itertools.product(*(range(n) for n in counts)):
        yield index, tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(index, chunks, shape))


def _chunk_selection(arr, index):
    return tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(index, arr.chunks, arr.shape))


def has_checksum(arr):
    codecs = arr.metadata.codecs
    encoding = arr.metadata.chunk_key_encoding
    return (bool(codecs) and type(codecs[-1]).__name__ == "Crc32cCodec"
            and getattr(encoding, "separator", None) == "/" and type(encoding).__name__ == "DefaultChunkKeyEncoding")


def checksum_problem(data):
    """'' if `data` (a chunk file's bytes) ends in the crc32c of the rest, else the reason."""
    import google_crc32c

    if len(data) < 4:
        return f"truncated chunk ({len(data)} bytes)"
    computed = np.uint32(google_crc32c.value(bytes(data[:-4]))).tobytes()
    if computed != bytes(data[-4:]):
        return "checksum mismatch"
    return ""


def find_damage(group, thorough=False, names=None, missing_only=False):
    """Damaged chunks of the group's per-point arrays (and its coordinates when thorough); with
    `missing_only`, only the chunks the manifest lists whose file is gone (no file is read)."""
    from seqphase.results.safe_io import read_bytes
    from seqphase.results.schema import LEDGER, _quiet, _short

    ndim = len(group.dims)
    if names is None:
        names = (list(group.dims) if thorough else []) + group.variables + list(LEDGER)
    found = []
    for name in names:
        arr = group.arrays[name]
        listed = set(group.manifest.listed(name)) if group.manifest is not None else set()
        if missing_only:
            for index in group.manifest.missing(name) if group.manifest is not None else ():
                selection = _chunk_selection(arr, index)
                found.append(Damage(name, index, selection[:ndim], MISSING))
            continue
        fast = not thorough and has_checksum(arr)
        if not thorough and not fast and not listed:
            continue  # a legacy array: no checksum to compare without decoding (seqphase verify decodes)
        for index, selection in chunk_regions(arr):
            region = selection[:ndim] if name not in group.dims else (slice(None),) * ndim
            key = "/".join(str(i) for i in index)
            path = group.folder / name / "c" / key
            if key in listed and not path.is_file():
                found.append(Damage(name, index, region, MISSING))
                continue
            if not thorough and not fast:
                continue
            if fast:
                try:  # a regular file within the chunk size, no link (safe_io)
                    data = read_bytes(path, "chunk", below=group.folder)
                except FileNotFoundError:
                    continue  # never written: all fill values
                except OSError as exc:
                    found.append(Damage(name, index, region, f"unreadable ({exc})"))
                    continue
                problem = checksum_problem(data)
                if problem:
                    found.append(Damage(name, index, region, problem))
            else:
                try:
                    with _quiet():
                        arr[selection]
                except Exception as exc:  # noqa: BLE001 -- any decode failure is damage
                    found.append(Damage(name, index, region, _short(exc)))
    return found


def damaged_mask(grid_shape, damages):
    mask = np.zeros(grid_shape, dtype=bool)
    for damage in damages:
        mask[damage.region] = True
    return mask


def damaged_points(group, damages):
    """Mask of the requested points that damaged chunks hold: those with a ledger entry, and where
    the `status` chunk itself is damaged, those whose hash says they were requested (or whose hash
    is damaged too)."""
    mask = damaged_mask(group.grid_shape, damages)
    status_lost = damaged_mask(group.grid_shape, [d for d in damages if d.array == "status"])
    hash_lost = damaged_mask(group.grid_shape, [d for d in damages if d.array == "point_hash"])
    status, hashes = group.ledger()
    requested = (status != 0) | (status_lost & ((hashes != "") | hash_lost))
    return mask & requested


def damage_summary(damages):
    """'2 chunks fail their checksum, 1 chunks written and now missing' (the parts that apply)."""
    gone = sum(1 for d in damages if d.reason == MISSING)
    parts = [f"{len(damages) - gone} chunks fail their checksum"] if len(damages) > gone else []
    return ", ".join(parts + ([f"{gone} chunks written and now missing"] if gone else []))


def never_written(group):
    """Chunks that no run wrote (no file, not listed): they read as fill values, which is right."""
    count = 0
    for name, arr in group.arrays.items():
        listed = set(group.manifest.listed(name)) if group.manifest is not None else set()
        for index, _ in chunk_regions(arr):
            key = "/".join(str(i) for i in index)
            if key not in listed and not (group.folder / name / "c" / key).is_file():
                count += 1
    return count
