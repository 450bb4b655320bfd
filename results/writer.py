"""The driver's batched writer: finished points are buffered and written chunk by chunk.

One write per chunk per array for a whole batch, instead of ~35 small writes per point. The order of a
flush keeps the ledger honest: the model's variables first, then the ledger's metadata (error,
runtime, host, ... and attempts), then the manifest (which now lists every chunk of the batch), the
`status` flags last, then the manifest again. Each chunk is replaced atomically and durably
(results/durable.py: temporary file, fsync, rename, fsync of the directory), so a point is "done" only
once its values are on the disk and listed; a driver killed (or a node lost) mid-flush leaves that
batch pending, recomputed by the next run. A flush that fails (a full disk, a quota) leaves its
points pending too, and the cached blocks are dropped, since they may hold what was not written.

The driver holds the store's lock, so it is the only writer: the blocks it has written are cached and
reused by the next flush (no read back), and dropped once a flush no longer touches them.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from seqphase.results.schema import DONE, ERROR_WIDTH, FAILED, LEDGER, PENDING, _quiet

META_KEYS = ("runtime_s", "host", "worker", "slurm_job_id")
WRITE_THREADS = 8  # arrays written at once by a flush


def _increment(block, local, _value):
    block[local] += 1


class BatchWriter:
    def __init__(self, group):
        self.group = group
        self._entries = []          # (index, hash, data or None, meta, error)
        self._cache = {}            # (array, chunk) -> block written last
        self._touched = set()
        self.last_flush = time.perf_counter()
        self.flush_s = 0.0          # wall time of the last flush
        self.stored_done = self.stored_failed = 0  # points whose status flag this writer wrote

    def __len__(self):
        return len(self._entries)

    def done(self, index, point_hash, data, meta):
        self._entries.append((index, point_hash, data, meta or {}, ""))

    def failed(self, index, point_hash, reason, meta=None):
        self._entries.append((index, point_hash, None, meta or {}, reason[:ERROR_WIDTH]))

    def mark_pending(self, cells):
        """(index, hash) cells requested but not done: hash and PENDING written now, done cells kept."""
        status = self.group.read("status")
        cells = [(index, h) for index, h in cells if status[index] != DONE]
        with self._failing(), _quiet():
            self._apply("point_hash", cells)
            self._apply("status", [(index, PENDING) for index, _ in cells])
            self.group.save_manifest()
        self._end_flush()

    def flush(self):
        """Write the buffered points: variables, ledger, done/failed flags last."""
        if not self._entries:
            self.last_flush = time.perf_counter()
            return 0
        started = time.perf_counter()
        entries, self._entries = self._entries, []
        updates = defaultdict(list)
        now = _dt.datetime.now(_dt.timezone.utc).timestamp()
        for index, point_hash, data, meta, error in entries:
            for name, value in (data or {}).items():
                updates[name].append((index, value))
            updates["error"].append((index, error))
            updates["attempts"].append((index, 1))
            updates["finished_at"].append((index, now))
            for key in META_KEYS:
                if meta.get(key) is not None:
                    updates[key].append((index, meta[key]))
            updates["point_hash"].append((index, point_hash))
        with self._failing(), _quiet():
            names = [n for n in self.group.variables if n in updates] + \
                [n for n in LEDGER if n != "status" and n in updates]
            self._apply_all([(n, updates[n], _increment if n == "attempts" else None) for n in names])
            self.group.save_manifest()  # every chunk holding the batch is listed before it is marked done
            self._apply("status", [(index, DONE if data is not None else FAILED)
                                   for index, _, data, _, _ in entries])
            self.stored_done += sum(1 for entry in entries if entry[2] is not None)
            self.stored_failed += sum(1 for entry in entries if entry[2] is None)
            self.group.save_manifest()
        self._end_flush()
        self.flush_s = time.perf_counter() - started
        return len(entries)

    def due(self, interval_s):
        """Time to flush: `interval_s` since the last one, stretched so flushing stays under ~10% of
        the driver's time when the chunks are large."""
        return bool(self._entries) and time.perf_counter() - self.last_flush >= max(interval_s, 10 * self.flush_s)

    # -- internals --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _failing(self):
        """A write that raises may have left cached blocks ahead of the disk: drop them all."""
        try:
            yield
        except BaseException:
            self._cache.clear()
            self._touched = set()
            raise

    def _apply_all(self, jobs):
        """`_apply` for several arrays at once, in threads: each chunk write waits for its fsyncs, and
        the file system serves concurrent fsyncs together (one journal commit for many files)."""
        if len(jobs) < 2:
            for job in jobs:
                self._apply(*job)
            return
        with ThreadPoolExecutor(max_workers=min(WRITE_THREADS, len(jobs))) as pool:
            for future in [pool.submit(self._apply, *job) for job in jobs]:
                future.result()

    def _apply(self, name, items, update=None):
        """Set cells of one array, one read (unless cached) and one write per chunk touched."""
        if not items:
            return
        arr = self.group.arrays[name]
        ndim = len(self.group.dims)
        grid_chunks = arr.chunks[:ndim]
        by_chunk = defaultdict(list)
        for index, value in items:
            by_chunk[tuple(i // c for i, c in zip(index, grid_chunks))].append((index, value))
        for chunk, cells in by_chunk.items():
            selection = tuple(slice(c * s, min((c + 1) * s, n)) for c, s, n in zip(chunk, grid_chunks, arr.shape))
            key = (name, chunk)
            block = self._cache.get(key)
            if block is None:
                block = self.group.read_block(name, selection)
            for index, value in cells:
                local = tuple(i - s.start for i, s in zip(index, selection))
                if update is None:
                    block[local] = value
                else:
                    update(block, local, value)
            arr[selection] = block
            self._cache[key] = block
            self._touched.add(key)

    def _end_flush(self):
        for key in list(self._cache):
            if key not in self._touched:
                del self._cache[key]
        self._touched = set()
        self.last_flush = time.perf_counter()

