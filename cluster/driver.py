"""The driver: plan -> skip what the store marks done -> submit -> write results as they arrive.

    points = plan.points                       # sweeps/planner.py
    todo   = points not done in the ledger     # results/store.py
    futures = client.submit(execute_point, payload, key=point.hash, retries=...)
    for each finished future: store.write_point (data first, done flag last)
    for each failed future:   store.write_failure (reason recorded; `retry-failed` reruns it)

Two failure paths stay apart: an exception raised by a point is retried `retries` times by Dask and
then recorded as `failed: <Exception>`; a worker that dies (killed, out of memory) has its points
rescheduled on the others by the scheduler, and only a point that kills workers repeatedly ends as
`failed: killed ...`. Nothing is silently dropped: every submitted point ends done or failed, or stays
pending if the driver itself is interrupted, and the next run picks pending points up.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from dataclasses import dataclass

from seqphase.cluster.tasks import execute_point
from seqphase.results.store import DONE, FAILED
from seqphase.sweeps.planner import make_point, payload

DEFAULT_RETRIES = 2


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


def run_sweep(plan, group, client, *, mode="resume", retries=DEFAULT_RETRIES, progress=True, stream=None):
    stream = stream or sys.stderr
    started = time.perf_counter()
    if mode == "retry-failed":
        plan.points = failed_points(plan, group)
    todo, already_done, skipped_failed = select_points(plan, group, mode)
    run_index = group.start_run({"mode": mode, "host": socket.gethostname(), "pid": os.getpid(),
                                 "scheduler": client.scheduler.address, "submitted": len(todo),
                                 "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""),
                                 "overrides": list(plan.sweep.overrides)})
    group.mark_pending([(index, point.hash) for point, index in todo])
    meter = Progress(len(todo), stream, enabled=progress)
    done = failed = 0
    futures = {}
    try:
        from distributed import as_completed

        for point, index in todo:
            future = client.submit(execute_point, payload(plan, point), key=point.hash, retries=retries,
                                   pure=False)
            futures[future.key] = (future, point, index)
        for future in as_completed([f for f, _, _ in futures.values()]):
            _, point, index = futures.pop(future.key)
            # No branching on future.status: a finished result held by a worker that dies before it is
            # gathered turns the status to "lost" (the scheduler recomputes it, result() waits for that);
            # reading the status here recorded such points as failed with no reason (seen under load).
            try:
                result = future.result()
            except Exception as exc:  # the point's own error after its retries, or KilledWorker
                group.write_failure(index, point.hash, failure_reason(exc))
                failed += 1
            else:
                group.write_point(index, point.hash, result["data"], result["meta"])
                done += 1
            future.release()
            meter.update(done, failed)
    except BaseException as exc:
        client.cancel([f for f, _, _ in futures.values()])
        group.finish_run(run_index, {"done": done, "failed": failed, "outcome": f"interrupted ({type(exc).__name__})"})
        meter.close()
        raise
    meter.close()
    summary = RunSummary(total=len(plan.points), already_done=already_done, skipped_failed=skipped_failed,
                         submitted=len(todo), done=done, failed=failed, elapsed_s=time.perf_counter() - started)
    group.finish_run(run_index, {"done": done, "failed": failed, "outcome": "finished",
                                 "elapsed_s": round(summary.elapsed_s, 3)})
    return summary


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
