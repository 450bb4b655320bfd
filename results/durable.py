"""Durable writes: every file the driver writes reaches the disk before the next step relies on it.

`DurableStore` is zarr's LocalStore with one change in how a key is written: the bytes go to a
temporary file in the same directory, which is fsync'ed, renamed over the key, and then the directory
(and every directory the write had to create) is fsync'ed too. A `set` therefore returns only once the
chunk and its directory entry are on the disk. Because the writer writes a batch's data and ledger
before its `status` chunk (results/writer.py), a point marked done survives a power loss or a node
crash, not only a killed driver.

Reads go through `results/safe_io.py` (`_read`): a key's file must be a regular file, with no link below
the store's root, within the size of a metadata file or a chunk; zarr's own reads of a group are therefore
as safe as seqphase's.

The store also journals what it wrote: for each key its size and the CRC-32C of the whole file, and
the keys it deleted. The group's manifest (results/manifest.py) is built from that journal.

`FSYNC` exists to measure what the fsyncs cost (benchmarks/store_scaling.py --no-fsync); the
environment variable SEQPHASE_FSYNC=0 turns it off for a whole process, and nothing else does.
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import threading
import uuid
from pathlib import Path

from zarr.storage import LocalStore

FSYNC = os.environ.get("SEQPHASE_FSYNC", "1") != "0"


def crc32c(data):
    import google_crc32c

    return int(google_crc32c.value(bytes(data)))


def fsync_dir(path):
    """fsync a directory (its entries); file systems that cannot (EINVAL/ENOTSUP) are left as they are."""
    if not FSYNC:
        return
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def write_file(path, data, exclusive=False):
    """Write `data` to `path` atomically and durably: temporary file, fsync, rename (link when
    `exclusive`: FileExistsError if `path` exists), fsync of the directory and of any directory
    created on the way. Returns the number of bytes."""
    path = Path(path)
    created = []
    parent = path.parent
    while not parent.exists():
        created.append(parent)
        parent = parent.parent
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.partial")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data).cast("B")
            written = 0
            while written < len(view):
                written += os.write(fd, view[written:])
            if FSYNC:
                os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            os.link(tmp, path)
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(path.parent)
    for folder in created:  # a new directory's entry lives in its parent
        fsync_dir(folder.parent)
    return len(view)


class DurableStore(LocalStore):
    """LocalStore whose writes are durable (see the module docstring) and journaled."""

    def __init__(self, root, *, read_only=False):
        super().__init__(root, read_only=read_only)
        self._journal_lock = threading.Lock()
        self.written = {}     # key -> (size, crc32c, the bytes of a zarr.json) written since the last take()
        self.deleted = set()  # keys (or key prefixes of deleted directories) since the last take()

    def with_read_only(self, read_only=False):
        clone = type(self)(root=self.root, read_only=read_only)
        clone._journal_lock, clone.written, clone.deleted = self._journal_lock, self.written, self.deleted
        return clone

    def _record(self, key, value, exclusive=False):
        data = value.as_buffer_like() if hasattr(value, "as_buffer_like") else value
        size = write_file(self.root / key, data, exclusive=exclusive)
        with self._journal_lock:
            self.written[key] = (size, crc32c(data), bytes(data) if key.endswith("zarr.json") else None)
            self.deleted.discard(key)

    def _forget(self, key):
        with self._journal_lock:
            self.deleted.add(key)
            self.written.pop(key, None)

    def take(self):
        """({key: (size, crc, metadata bytes or None)}, {deleted keys}) since the last take."""
        with self._journal_lock:
            written, deleted = dict(self.written), set(self.deleted)
            self.written.clear()
            self.deleted.clear()
        return written, deleted

    # -- zarr's Store interface -------------------------------------------------------------------
    def _read(self, key, prototype, byte_range):
        """The bytes of `key` through `safe_io.read_bytes` (a regular file, no link below the root, within
        the size of its kind); None where zarr expects it: no such file, or a folder on its path is a file
        (a stray file in a group's folder that zarr asks for `NAME/zarr.json`)."""
        from zarr.core.buffer import default_buffer_prototype
        from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest

        from seqphase.core.errors import StoreError
        from seqphase.results.safe_io import read_bytes

        path = self.root / key
        try:
            data = read_bytes(path, "metadata" if key.rsplit("/", 1)[-1] == "zarr.json" else "chunk", below=self.root)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except StoreError:
            if any(p.is_file() and not p.is_symlink() for p in path.parents if self.root in p.parents):
                return None
            raise
        if isinstance(byte_range, RangeByteRequest):
            data = data[byte_range.start:byte_range.end]
        elif isinstance(byte_range, OffsetByteRequest):
            data = data[byte_range.offset:]
        elif isinstance(byte_range, SuffixByteRequest):
            data = data[max(0, len(data) - byte_range.suffix):]
        return (prototype or default_buffer_prototype()).buffer.from_bytes(data)

    async def get(self, key, prototype=None, byte_range=None):
        if not self._is_open:
            await self._open()
        return await asyncio.to_thread(self._read, key, prototype, byte_range)

    def get_sync(self, key, *, prototype=None, byte_range=None):
        self._ensure_open_sync()
        return self._read(key, prototype, byte_range)

    async def get_partial_values(self, prototype, key_ranges):
        return [await self.get(key, prototype, byte_range) for key, byte_range in key_ranges]

    async def _set(self, key, value, exclusive=False):
        if not self._is_open:
            await self._open()
        self._check_writable()
        await asyncio.to_thread(self._record, key, value, exclusive)

    def set_sync(self, key, value):
        self._ensure_open_sync()
        self._check_writable()
        self._record(key, value)

    async def delete(self, key):
        await asyncio.to_thread(self.delete_sync, key)

    def delete_sync(self, key):
        self._check_writable()
        path = self.root / key
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
        fsync_dir(path.parent)
        self._forget(key)

    async def delete_dir(self, prefix):
        await super().delete_dir(prefix)
        fsync_dir((self.root / prefix).parent)
        self._forget(prefix.rstrip("/") + "/")
