"""The driver: plan -> skip what the store marks done -> submit -> write results as they arrive.

    points = plan.points                       # sweeps/planner.py
    todo   = points not done in the ledger     # results/store.py (damaged points were reset to pending)
    tasks  = cheap points batched (execute_batch), costly ones alone (execute_point, Dask retries)
    for each finished task: writer.done / writer.failed per point (buffered)
    every FLUSH_S (or so): writer.flush(), chunk by chunk, data first and done flags last

Batching: the first tasks hold one point each; from then on a task holds as many points as fit in
TASK_S of measured runtime (at most MAX_BATCH, and few enough that every worker still gets a share of
the tail). Tasks are submitted a window at a time, so the driver's memory does not grow with the plan.

Two failure paths stay apart: an exception raised by a point is retried `retries` times (by Dask for a
lone point; a point that raised inside a batch is resubmitted alone with the retries left) and then
recorded as `failed: <Exception>`; a worker that dies (killed, out of memory) has its tasks rescheduled
on the others by the scheduler, and a batch that kills workers repeatedly is split into lone points, so
only the point that kills workers ends as `failed: killed ...`. Nothing is silently dropped: every
submitted point ends done or failed, or stays pending if the driver itself is interrupted, and the next
run picks pending points up.
"""

from __future__ import annotations

import collections
import hashlib
import os
import socket
import sys
import time
from dataclasses import dataclass

from seqphase.cluster.tasks import execute_batch, execute_point
from seqphase.results.store import DONE, FAILED
from seqphase.sweeps.planner import make_point, payload

DEFAULT_RETRIES = 2
FLUSH_S = 1.0        # write buffered points at least this often (seconds)
TASK_S = 0.5         # aim for tasks of about this much compute (seconds)
MAX_BATCH = 512      # points in one task, at most
SHARED = ("model", "method", "settings", "seed_entropy")  # payload keys common to all points of a plan


@dataclass
class RunSummary:
    total: int
    already_done: int
    skipped_failed: int
    submitted: int
    done: int
    failed: int
    elapsed_s: float

    def line(self):
        text = (f"{self.done} computed, {self.failed} failed, {self.already_done} already done "
                f"(of {self.total} points) in {self.elapsed_s:.1f} s")
        if self.skipped_failed:
            text += f"; {self.skipped_failed} failed earlier and were skipped (seqphase retry-failed)"
        return text


def select_points(plan, group, mode="resume"):
    """(point, cell index) pairs to compute: `resume` = not done with this hash (failed ones are left
    for `retry-failed`); `retry-failed` = the cells recorded failed."""
    status, hashes = group.ledger()
    todo, done, skipped_failed = [], 0, 0
    for point in plan.points:
        index = group.index_of(point)
        same = hashes[index] == point.hash
        if status[index] == DONE and same:
            done += 1
        elif status[index] == FAILED and same and mode == "resume":
            skipped_failed += 1
        elif mode == "resume" or (status[index] == FAILED and same):
            todo.append((point, index))
    return todo, done, skipped_failed


def failed_points(plan, group):
    """Points of the cells that the ledger records as failed (whatever grid the last run asked for)."""
    status, _ = group.ledger()
    cells = [tuple(int(i) for i in idx) for idx in zip(*(status == FAILED).nonzero())]
    method = plan.sweep.method
    points = []
    for idx in cells:
        stored = group.cell_params(idx)
        # Coordinates come back as float or str; re-normalise (an int parameter hashes as an int).
        values = [plan.model.check_value(method, d, stored[d]) if d in plan.model.params else stored[d]
                  for d in group.dims]
        points.append(make_point(plan.model, plan.identity, group.dims, values))
    return points


def run_sweep(plan, group, client, *, mode="resume", retries=DEFAULT_RETRIES, progress=True, stream=None,
              flush_s=FLUSH_S):
    stream = stream or sys.stderr
    started = time.perf_counter()
    if mode == "retry-failed":
        plan.points = failed_points(plan, group)
    if group.damaged_cells:
        stream.write(f"seqphase: {group.damaged_cells} points had damaged data ({len(group.repaired)} chunks "
                     "failed their checksum) and are pending again\n")
    todo, already_done, skipped_failed = select_points(plan, group, mode)
    run_index = group.start_run({"mode": mode, "host": socket.gethostname(), "pid": os.getpid(),
                                 "scheduler": client.scheduler.address, "submitted": len(todo),
                                 "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""),
                                 "overrides": list(plan.sweep.overrides)})
    writer = group.writer()
    writer.mark_pending([(index, point.hash) for point, index in todo])
    meter = Progress(len(todo), stream, enabled=progress)
    tasks = _Tasks(plan, client, todo, retries)
    done = failed = 0
    try:
        for future in tasks.completed():
            items, retries_left = tasks.take(future)
            try:
                result = future.result()
            except Exception as exc:  # a lone point's own error after its retries, or KilledWorker
                if len(items) > 1:
                    tasks.split(items)  # find the point at fault: each alone, with the retries
                else:
                    point, index = items[0]
                    writer.failed(index, point.hash, failure_reason(exc))
                    failed += 1
            else:
                for (point, index), res in zip(items, [result] if len(items) == 1 else result):
                    if "error" not in res:
                        writer.done(index, point.hash, res["data"], res["meta"])
                        tasks.record(res["meta"]["runtime_s"])
                        done += 1
                    elif retries_left > 0:
                        tasks.alone((point, index), retries_left - 1)
                    else:
                        writer.failed(index, point.hash, res["error"], res["meta"])
                        failed += 1
            future.release()
            if writer.due(flush_s):
                writer.flush()
            meter.update(done, failed)
            tasks.fill()
        writer.flush()
    except BaseException as exc:
        tasks.cancel()
        try:
            writer.flush()  # what was computed is kept
        finally:
            group.finish_run(run_index, {"done": done, "failed": failed,
                                         "outcome": f"interrupted ({type(exc).__name__})"})
            group.store.consolidate()
            meter.close()
        raise
    meter.close()
    summary = RunSummary(total=len(plan.points), already_done=already_done, skipped_failed=skipped_failed,
                         submitted=len(todo), done=done, failed=failed, elapsed_s=time.perf_counter() - started)
    group.finish_run(run_index, {"done": done, "failed": failed, "outcome": "finished",
                                 "elapsed_s": round(summary.elapsed_s, 3)})
    problem = group.store.consolidate()
    if problem:
        stream.write(f"seqphase: note: metadata not consolidated ({problem})\n")
    return summary


class _Tasks:
    """Submission of a plan's points as Dask tasks: batches sized from measured runtimes, a bounded
    window in flight, lone resubmission of points that raised or of batches whose workers died."""

    def __init__(self, plan, client, todo, retries):
        from distributed import as_completed

        self.plan, self.client, self.retries = plan, client, retries
        self.queue = collections.deque((item, retries, False) for item in todo)  # (item, retries, alone)
        self.inflight = {}  # key -> (future, items, retries)
        self.finished = as_completed()
        self.runtime_sum, self.runtime_n = 0.0, 0
        self._threads, self._threads_at = 1, -1e9
        self.fill()

    def completed(self):
        while self.inflight:
            idle = time.perf_counter()
            while not self.finished.has_ready():  # meanwhile, widen the window as workers join (SLURM)
                time.sleep(0.01)
                if time.perf_counter() - idle > 2.0:
                    self.fill()
                    idle = time.perf_counter()
            yield next(self.finished)

    def take(self, future):
        _, items, retries = self.inflight.pop(future.key)
        return items, retries

    def record(self, runtime_s):
        self.runtime_sum += runtime_s
        self.runtime_n += 1

    def alone(self, item, retries):
        self.queue.appendleft((item, retries, True))

    def split(self, items):
        for item in reversed(items):
            self.queue.appendleft((item, self.retries, True))

    def threads(self):
        now = time.perf_counter()
        if now - self._threads_at > 2.0:
            self._threads = max(1, sum(self.client.nthreads().values()))
            self._threads_at = now
        return self._threads

    def batch_size(self):
        if not self.runtime_n:
            return 1
        size = int(TASK_S * self.runtime_n / max(self.runtime_sum, 1e-9))
        share = -(-len(self.queue) // (2 * self.threads()))  # keep the tail spread over the workers
        return max(1, min(size, MAX_BATCH, share))

    def fill(self):
        window = 2 * self.threads() + 2
        while self.queue and len(self.inflight) < window:
            item, retries, alone = self.queue.popleft()
            items = [item]
            if not alone:
                size = self.batch_size()
                while self.queue and len(items) < size and not self.queue[0][2]:
                    items.append(self.queue.popleft()[0])
            self._submit(items, retries)

    def _submit(self, items, retries):
        if len(items) == 1:
            point, _ = items[0]
            future = self.client.submit(execute_point, payload(self.plan, point), key=point.hash,
                                        retries=retries, pure=False)
        else:
            full = [payload(self.plan, point) for point, _ in items]
            common = {k: full[0][k] for k in SHARED}
            points = [{k: v for k, v in p.items() if k not in SHARED} for p in full]
            key = "seqphase-batch-" + hashlib.sha256("".join(p.hash for p, _ in items).encode()).hexdigest()[:32]
            # No Dask retries for a batch: its points catch their own errors (retried alone by the driver).
            future = self.client.submit(execute_batch, common, points, key=key, retries=0, pure=False)
        self.inflight[future.key] = (future, items, retries)
        self.finished.add(future)

    def cancel(self):
        self.client.cancel([future for future, _, _ in self.inflight.values()])


def failure_reason(exc):
    name = type(exc).__name__
    if name == "KilledWorker":
        return f"killed: the workers running this point died repeatedly ({exc})"
    return f"{name}: {exc}"


class Progress:
    """A one-line counter on a terminal (a line per 10% elsewhere): done, failed, rate, ETA."""

    def __init__(self, total, stream, enabled=True):
        self.total, self.stream, self.enabled = total, stream, enabled and total > 0
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.started = time.perf_counter()
        self.last_decile = -1

    def update(self, done, failed):
        if not self.enabled:
            return
        finished = done + failed
        elapsed = time.perf_counter() - self.started
        rate = finished / elapsed if elapsed > 0 else 0.0
        eta = (self.total - finished) / rate if rate > 0 else float("inf")
        width = 30
        filled = int(width * finished / self.total)
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {finished}/{self.total} points, {failed} failed, "
                f"{rate * 60:.1f}/min, eta {eta:.0f} s")
        if self.tty:
            self.stream.write("\r" + line)
            self.stream.flush()
        elif finished * 10 // self.total > self.last_decile:
            self.last_decile = finished * 10 // self.total
            self.stream.write(line + "\n")
            self.stream.flush()

    def close(self):
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()
