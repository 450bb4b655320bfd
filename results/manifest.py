"""The group's manifest: which chunk files were written, so that one that is gone is damage, not fill.

Zarr reads a missing chunk file as fill values, so on its own a store cannot tell a chunk never
written from one written and later deleted (a scratch purge, a stray `rm`). The manifest can. It is
one JSON file per sweep group, `<store>/.seqphase/manifests/<group>.json` (outside the group's
folder, so that zarr and xarray, which list a group's folder, never meet it), with:
- `chunks`: every chunk file the driver wrote, as {"<array>/c/<i>/<j>/...": [bytes, crc32c]}: the
  size and the CRC-32C of the whole file at its last write;
- `metadata`: each array's `zarr.json`, so that a deleted array folder is recreated by the next run;
- `group`: the group's creation time and identity hash (a manifest left behind by a group that was
  moved aside does not apply to the one created under the same name later);
- `complete`: false when the manifest was started on a group written before manifests existed (the
  chunks already gone then cannot be known), with the date in `since`.

The rule that makes it reliable: a chunk is listed before any point it holds is marked done. The
writer writes a batch's data and ledger chunks (durably, results/durable.py), saves the manifest,
then writes the `status` chunks, then saves the manifest again. Every write goes through
`DurableStore`, which journals the keys it wrote; `SweepGroup.save_manifest` folds the journal in.
The driver's writer always writes whole chunks, fill values included (`write_empty_chunks`), so a
listed chunk file is never removed by a write; only a repair (damaged chunks) or a rolled-back grid
extension removes one, and those remove its entry too.

A listed chunk whose file is absent is damage ("missing"); a file present but not listed is a
write the manifest has not caught up with (the driver stopped between a write and the save), taken
in by the next run (`reconcile`). A chunk's own crc32c (the last 4 bytes) still finds changed bytes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from seqphase.core.errors import StoreError
from seqphase.results.safe_io import loads_json, read_bytes, read_text

FORMAT = 1


def manifest_path(folder):
    """Where the manifest of the group in `folder` lives."""
    folder = Path(folder)
    return folder.parent / ".seqphase" / "manifests" / f"{folder.name}.json"


def group_identity(attrs):
    return {"created_at": attrs.get("created_at", ""), "identity_hash": attrs.get("identity_hash", "")}


_CHUNK_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}/c/[0-9]{1,9}(/[0-9]{1,9})*")


def _check_entries(chunks, metadata):
    """ValueError unless the manifest's entries are what a run writes: chunk keys ARRAY/c/I/J/... (a plain
    array name, integer indices: no path can be built out of the group from them) with [bytes, crc], and
    metadata objects under plain array names."""
    if not isinstance(chunks, dict) or not isinstance(metadata, dict):
        raise ValueError("chunks and metadata must be objects")
    for key, entry in chunks.items():
        if not _CHUNK_KEY.fullmatch(key) or not (isinstance(entry, list) and len(entry) == 2 and
                                                 all(isinstance(v, int) and not isinstance(v, bool) for v in entry)):
            raise ValueError(f"chunk entry {key!r}")
    for name, meta in metadata.items():
        if not _CHUNK_KEY.fullmatch(f"{name}/c/0") or not isinstance(meta, dict):
            raise ValueError(f"metadata entry {name!r}")


class Manifest:
    def __init__(self, folder, data):
        self.folder = Path(folder)
        self.data = data

    @property
    def path(self):
        return manifest_path(self.folder)

    @property
    def chunks(self):
        return self.data["chunks"]

    @property
    def metadata(self):
        return self.data["metadata"]

    @property
    def complete(self):
        return bool(self.data.get("complete"))

    # -- reading ------------------------------------------------------------------------------------
    @classmethod
    def load(cls, folder, attrs):
        """The group's manifest, or None (none written yet, or one left by another group of that name)."""
        path = manifest_path(folder)
        try:  # a regular file within its size; no link from the store's folder down (`safe_io`)
            text = read_text(path, "manifest", below=Path(folder).parent)
        except FileNotFoundError:
            return None
        try:
            data = loads_json(text)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError("not a seqphase manifest")
            _check_entries(data["chunks"], data["metadata"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreError(str(path), f"corrupted chunk manifest ({exc})",
                             f"restore it from a copy, or delete it: the next `seqphase run` starts a new one from "
                             f"the chunks present (chunks already gone then cannot be told from fill)") from None
        if data.get("group") != group_identity(attrs):
            return None
        return cls(folder, data)

    @classmethod
    def new(cls, folder, attrs, complete):
        from seqphase.results.schema import now_iso

        return cls(folder, {"format": FORMAT, "group": group_identity(attrs), "complete": bool(complete),
                            "since": now_iso(), "chunks": {}, "metadata": {}})

    def listed(self, array):
        """{chunk key under the array ("0/0/..."): [bytes, crc]} of one array."""
        prefix = f"{array}/c/"
        return {key[len(prefix):]: entry for key, entry in self.chunks.items() if key.startswith(prefix)}

    def missing(self, array):
        """Chunk indices (tuples) of `array` that are listed and whose file is gone."""
        out = []
        for key in self.listed(array):
            if not (self.folder / array / "c" / key).is_file():
                out.append(tuple(int(i) for i in key.split("/")))
        return sorted(out)

    # -- writing ------------------------------------------------------------------------------------
    def apply(self, written, deleted, prefix):
        """Fold a DurableStore journal (keys relative to the store root) into the manifest."""
        for key in deleted:
            if not key.startswith(prefix):
                continue
            rel = key[len(prefix):]
            for listed in [k for k in self.chunks if k == rel or k.startswith(rel.rstrip("/") + "/")]:
                del self.chunks[listed]
            array = rel.rstrip("/")
            if "/" not in array:
                self.metadata.pop(array, None)
        for key, (size, crc, meta) in written.items():
            if not key.startswith(prefix):
                continue
            rel = key[len(prefix):]
            parts = rel.split("/")
            if len(parts) == 2 and parts[1] == "zarr.json" and meta is not None:
                try:
                    parsed = loads_json(bytes(meta))
                except ValueError:
                    continue
                if isinstance(parsed, dict) and parsed.get("node_type") == "array":
                    self.metadata[parts[0]] = parsed
            elif len(parts) > 2 and parts[1] == "c":
                self.chunks[rel] = [int(size), int(crc)]

    def forget(self, array, chunk):
        self.chunks.pop(f"{array}/c/" + "/".join(str(i) for i in chunk), None)

    def save(self):
        from seqphase.results.durable import write_file

        write_file(self.path, json.dumps(self.data, separators=(",", ":")).encode())

    def reconcile(self, arrays):
        """Take in chunk files present but not listed (or changed since listed), from a driver that
        stopped between a write and the save. Returns how many entries changed."""
        from seqphase.results.durable import crc32c

        changed = 0
        for array in arrays:
            root = self.folder / array / "c"
            if not root.is_dir():
                continue
            for file in root.rglob("*"):
                if not file.is_file() or file.name.endswith(".partial"):
                    continue
                key = f"{array}/c/" + file.relative_to(root).as_posix()
                size = file.stat().st_size
                entry = self.chunks.get(key)
                if entry is not None and entry[0] == size:
                    continue
                self.chunks[key] = [size, crc32c(read_bytes(file, "chunk", below=self.folder))]
                changed += 1
        return changed

    def adopt_metadata(self, arrays):
        """Copy the arrays' zarr.json into the manifest (a manifest started on an existing group)."""
        for array in arrays:
            try:
                self.metadata[array] = loads_json(read_text(self.folder / array / "zarr.json", "metadata",
                                                            below=self.folder))
            except (OSError, ValueError, StoreError):
                continue
