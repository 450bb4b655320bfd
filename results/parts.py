"""Finished works of points that are not stored yet.

A point cut into several tasks (its seeds, Monte-Carlo blocks, search probes: `core.models.Work`) is
stored when all its works are in. Until then the driver keeps each finished work's result here, one
file per work, so a killed driver (or a point that failed on one seed) loses only the works that were
in flight: the next run (`run` or `retry-failed`) loads them, submits only the missing works, and
removes the point's files once the point is stored. Each file holds the work's result with its metadata
(`Kept`: the runtime, host and worker it ran on), so a point assembled across several runs still stores the
time of all its works (`runtime_s`).

Layout: <store>/.seqphase-parts/<sweep>/<point hash>/<work key>.npz. A file is data only: an uncompressed
.npz read with `allow_pickle=False`, holding a JSON tree of the result (None, booleans, integers, floats
as exact hex, complex numbers, strings, lists, tuples, dicts) whose arrays and numpy scalars are members
of their own (numeric, boolean or string dtypes; no object arrays), and the SHA-256 of all of it. A file
that is not of this form, fails its checksum or holds a member larger than the file is dropped and its work
recomputed; nothing in it is ever executed. Files of the earlier pickle layout (`*.pkl`) are never
opened: their works are recomputed (`legacy` counts them, `drop_legacy` removes them).

The point hash names everything that determines the result (parameters, settings, seed, algorithm
version), so a file is only ever reused by the same computation. Each file is written to a temporary
name, flushed to disk and renamed. The folder starts with a dot: no zarr node and no sweep, invisible
to readers of the store.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

FOLDER = ".seqphase-parts"
SUFFIX = ".npz"
FORMAT = "seqphase-kept-work 1"
_SAFE = re.compile(r"[A-Za-z0-9_.+-]+")
_MEMBER = re.compile(r"a[0-9]+")
_KINDS = "biufcU"  # numpy dtype kinds a kept array may have (no objects, no structured or void data)
MAX_DEPTH = 64      # nesting of lists, tuples and dicts in a kept result


class Kept(NamedTuple):
    """One kept work as written to its file: the result and the work's metadata ({"runtime_s": ..., "host":
    ...}; None where it is not known)."""

    result: object
    meta: dict | None


class Unkeepable(TypeError):
    """A result holding a value that the file format cannot hold (e.g. an arbitrary object)."""


# -- the file format --------------------------------------------------------------------------------------
def _encode(value, arrays, depth=0):
    if depth > MAX_DEPTH:
        raise Unkeepable("nested too deeply")
    if value is None:
        return ["none"]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, np.generic):  # before float: np.float64 is a float
        return _member(np.asarray(value), arrays, "scalar")
    if isinstance(value, np.ndarray):
        return _member(value, arrays, "array")
    if isinstance(value, int):
        return ["int", str(int(value))]
    if isinstance(value, float):
        return ["float", float(value).hex()]
    if isinstance(value, complex):
        return ["complex", value.real.hex(), value.imag.hex()]
    if isinstance(value, str):
        return ["str", value]
    if type(value) is list:
        return ["list", [_encode(v, arrays, depth + 1) for v in value]]
    if type(value) is tuple:
        return ["tuple", [_encode(v, arrays, depth + 1) for v in value]]
    if type(value) is dict:
        return ["dict", [[_encode(k, arrays, depth + 1), _encode(v, arrays, depth + 1)] for k, v in value.items()]]
    raise Unkeepable(f"a {type(value).__name__} cannot be kept")


def _member(array, arrays, tag):
    if array.dtype.kind not in _KINDS or array.dtype.fields is not None or array.dtype.hasobject:
        raise Unkeepable(f"an array of dtype {array.dtype} cannot be kept")
    name = f"a{len(arrays)}"
    arrays[name] = np.array(array, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    return [tag, name]


def _decode(node, arrays, depth=0):
    if depth > MAX_DEPTH or not isinstance(node, list) or not node or not isinstance(node[0], str):
        raise ValueError("malformed tree")
    tag, rest = node[0], node[1:]
    if tag == "none" and not rest:
        return None
    if len(rest) == 1:
        (arg,) = rest
        if tag == "bool" and isinstance(arg, bool):
            return arg
        if tag == "int" and isinstance(arg, str) and re.fullmatch(r"-?[0-9]{1,400}", arg):
            return int(arg)
        if tag == "float" and isinstance(arg, str):
            return float.fromhex(arg)
        if tag == "str" and isinstance(arg, str):
            return arg
        if tag in ("array", "scalar") and isinstance(arg, str) and arg in arrays:
            return arrays[arg] if tag == "array" else arrays[arg][()]
        if tag in ("list", "tuple") and isinstance(arg, list):
            items = [_decode(v, arrays, depth + 1) for v in arg]
            return items if tag == "list" else tuple(items)
        if tag == "dict" and isinstance(arg, list):
            out = {}
            for pair in arg:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ValueError("malformed dict")
                out[_decode(pair[0], arrays, depth + 1)] = _decode(pair[1], arrays, depth + 1)
            return out
    if tag == "complex" and len(rest) == 2 and all(isinstance(x, str) for x in rest):
        return complex(float.fromhex(rest[0]), float.fromhex(rest[1]))
    raise ValueError(f"malformed tree node {tag!r}")


def _digest(tree_bytes, arrays):
    h = hashlib.sha256(FORMAT.encode() + b"\0" + tree_bytes)
    for name in sorted(arrays, key=lambda n: int(n[1:])):
        array = arrays[name]
        h.update(f"\0{name}\0{array.dtype.str}\0{array.shape}\0".encode())
        h.update(array.tobytes(order="C"))
    return h.hexdigest()


def encode(kept):
    """The bytes of a kept work's file (Unkeepable when the result holds a value the format cannot hold)."""
    arrays = {}
    tree = _encode([kept.result, kept.meta], arrays)
    tree_bytes = json.dumps({"format": FORMAT, "tree": tree}, separators=(",", ":")).encode()
    members = {"tree": np.frombuffer(tree_bytes, dtype=np.uint8),
               "sha256": np.frombuffer(_digest(tree_bytes, arrays).encode(), dtype=np.uint8), **arrays}
    buffer = io.BytesIO()
    np.savez(buffer, **members)  # stored, not compressed: no member can unpack to more than the file's size
    return buffer.getvalue()


def decode(path):
    """The Kept of a file written by `encode`; ValueError for anything else (nothing in it is executed)."""
    from seqphase.results.safe_io import read_bytes

    data = read_bytes(path, "work", below=Path(path).parent)
    size = len(data)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
        names = {info.filename for info in infos}
        if len(names) != len(infos) or "tree.npy" not in names or "sha256.npy" not in names:
            raise ValueError("not a kept-work file")
        for info in infos:
            stem = info.filename[:-4]
            if (not info.filename.endswith(".npy") or info.compress_type != zipfile.ZIP_STORED
                    or info.file_size > size or not (stem in ("tree", "sha256") or _MEMBER.fullmatch(stem))):
                raise ValueError(f"unexpected member {info.filename!r}")
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        members = {name: npz[name] for name in npz.files}
    tree_bytes = members.pop("tree").tobytes()
    digest = members.pop("sha256").tobytes().decode("ascii")
    for name, array in members.items():
        if array.dtype.kind not in _KINDS or array.dtype.fields is not None:
            raise ValueError(f"member {name} has dtype {array.dtype}")
    if _digest(tree_bytes, members) != digest:
        raise ValueError("checksum mismatch")
    document = json.loads(tree_bytes)
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError("unknown format")
    pair = _decode(document.get("tree"), members)
    if not isinstance(pair, list) or len(pair) != 2 or not (pair[1] is None or isinstance(pair[1], dict)):
        raise ValueError("malformed kept work")
    return Kept(pair[0], pair[1])


class Parts:
    def __init__(self, store_path, sweep):
        self.root = Path(store_path) / FOLDER / sweep

    def _folder(self, point_hash):
        if not _SAFE.fullmatch(point_hash) or point_hash.startswith("."):
            raise ValueError(f"point hash {point_hash!r} is not a safe file name")
        return self.root / point_hash

    def load(self, point_hash):
        """{work key: result} of the works of the point finished by earlier runs."""
        return {key: kept.result for key, kept in self.load_kept(point_hash).items()}

    def load_kept(self, point_hash):
        """{work key: Kept(result, meta)} of the works of the point finished by earlier runs."""
        folder = self._folder(point_hash)
        if folder.is_symlink() or not folder.is_dir():
            return {}
        found = {}
        for path in folder.glob(f"*{SUFFIX}"):
            key = path.name[: -len(SUFFIX)]
            try:
                if path.is_symlink() or not path.is_file() or not _SAFE.fullmatch(key):
                    raise ValueError("not a plain file")
                found[key] = decode(path)
            except Exception:  # noqa: BLE001 -- truncated, damaged or foreign: recompute that work
                path.unlink(missing_ok=True)
        return found

    def save(self, point_hash, key, result, meta=None):
        """Keep one finished work: its result and its metadata (the driver's: runtime_s, host, worker).
        Returns False, writing nothing, for a result the format cannot hold (its work is then recomputed
        if the point is not stored by this run)."""
        if not _SAFE.fullmatch(key) or key.startswith("."):
            raise ValueError(f"work key {key!r} is not a safe file name")
        try:
            data = encode(Kept(result, meta))
        except Unkeepable:
            return False
        folder = self._folder(point_hash)
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"{key}{SUFFIX}"
        temporary = folder / f".{key}.{os.getpid()}.tmp"
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, final)
        return True

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
        return sorted(p.name for p in self.root.iterdir()
                      if _SAFE.fullmatch(p.name) and not p.name.startswith(".") and p.is_dir() and not p.is_symlink())

    def counts(self):
        """{point hash: number of kept works} (what `seqphase status` reports of points still running)."""
        return {h: sum(1 for _ in (self.root / h).glob(f"*{SUFFIX}")) for h in self.points()}

    def legacy(self):
        """The files of the earlier pickle layout under this sweep's folder (never opened)."""
        return sorted(p for h in self.points() for p in (self.root / h).glob("*.pkl"))

    def drop_legacy(self):
        """Remove the files of the earlier pickle layout (their works are recomputed); their number."""
        files = self.legacy()
        for path in files:
            path.unlink(missing_ok=True)
        return len(files)

    def prune(self, stored_hashes):
        """Drop the kept works of points that are stored (e.g. a driver killed between storing a point
        and removing its files)."""
        for point_hash in self.points():
            if point_hash in stored_hashes:
                self.drop(point_hash)
