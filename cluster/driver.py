"""The driver: plan -> skip what the store marks done -> cut points into works -> submit -> assemble
points from their works -> write them as they arrive.

    points = plan.points                       # sweeps/planner.py
    todo   = points not done in the ledger     # results/store.py (damaged points were reset to pending)
    works  = each point's task generator (core.models.Method.tasks): its seeds, Monte-Carlo blocks or
             search probes, in stages; a method without one is a single work (the whole point)
    tasks  = works submitted as Dask tasks: cheap works batched (execute_batch), costly ones alone
             (execute_work); a work that raises comes back as a record, retried here
    for each finished work: kept (results/parts.py) until its point has all its works; then the point
             is assembled here and written with writer.done / writer.failed (buffered)
    every FLUSH_S (or so): writer.flush(), chunk by chunk, data first and done flags last

A point's generator runs here, in the driver (bookkeeping and assembly only, no heavy numerics): it
yields lists of works, receives their results, and returns the point's outputs. The works themselves
are plain Dask tasks with no dependencies on one another, so nothing nests, nothing waits on a worker,
and one worker is enough (no deadlock); the scheduler places them. The values do not depend on how a
point is cut: `Method.run` drives the same generator serially.

Batching: the first tasks hold one work each; from then on a task holds as many works as fit in TASK_S
of measured runtime (at most MAX_BATCH, and few enough that every worker still gets a share of the
tail), so the seeds of a cheap GAMP point run as one block and those of a costly one spread over the
cluster. Points are started as the queue needs works, so the driver's memory does not grow with the
plan.

Failures stay apart: a work that raises is retried `retries` times, alone (resubmitted by the driver: the
task returns the error and its traceback instead of raising, so Dask logs nothing), then its point is
recorded as `failed: <work>: <Exception>`, one line on the run's stream names it with its parameters,
the run record keeps its traceback (`seqphase status --traceback`), and its other works are kept, so
`retry-failed` recomputes only the one that failed. A worker that dies has its tasks rescheduled by the scheduler; a batch that kills workers
repeatedly is split into lone works, so only the work that kills workers ends its point as `failed:
killed ...`. Nothing is silently dropped: every submitted point ends done or failed, or stays pending
(with its finished works kept) if the driver itself is interrupted, and the next run picks it up.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import re
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field

from seqphase.cluster.tasks import execute_batch, execute_work
from seqphase.core.models import Work, check_outputs, point_stream, run_point
from seqphase.results.parts import Parts
from seqphase.results.store import DONE, FAILED
from seqphase.sweeps.planner import make_point

DEFAULT_RETRIES = 2
FLUSH_S = 1.0        # write buffered points at least this often (seconds)
TASK_S = 0.5         # aim for tasks of about this much compute (seconds)
MAX_BATCH = 512      # works in one task, at most
TRACEBACKS_KEPT = 50        # failed points of one run whose traceback its run record keeps
TRACEBACK_CHARS = 4000      # of each, the last characters (the frames nearest the error)


@dataclass
class RunSummary:
    total: int
    already_done: int
    skipped_failed: int
    submitted: int
    done: int
    failed: int
    elapsed_s: float
    width: dict = field(default_factory=dict)   # measured work, longest chain, tasks (Width.record)
    grid: dict = field(default_factory=dict)    # the run's grid: {dim: values} (the plan's coordinates)

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
    settings = plan.model.method(method).settings
    points = []
    for idx in cells:
        stored = group.cell_params(idx)
        # Coordinates come back as float or str; re-normalise (an int parameter hashes as an int).
        values = [plan.model.check_value(method, d, stored[d]) if d in plan.model.params else
                  settings[d].normalise(stored[d], f"method.{d}") if d in plan.sweep.setting_axes else stored[d]
                  for d in group.dims]
        points.append(make_point(plan.model, plan.identity, group.dims, values))
    return points


def stored_hashes(group):
    status, hashes = group.ledger()
    return set(hashes[status == DONE].tolist())


def run_word(mode, already_done, skipped_failed, kept, damaged):
    """What a run is called in its first line and in the store's run record: `retry-failed` as asked;
    otherwise `resume` when it finds points of its grid already stored (done, failed, damaged, or with
    finished works kept), else `run`."""
    if mode != "resume":
        return mode
    return "resume" if already_done or skipped_failed or kept or damaged else "run"


def run_sweep(plan, group, client, *, mode="resume", retries=DEFAULT_RETRIES, progress=True, stream=None,
              flush_s=FLUSH_S, submit_ahead=0, task_log=None, announce=None):
    """Compute the plan's points that are not done and store them. `submit_ahead`: tasks to keep
    submitted at least (an adaptive cluster sizes itself from the tasks its scheduler knows of);
    otherwise twice the cluster's threads. `task_log`: a file to which each stored point appends one
    JSON line {"point": hash, "stages": [[runtime_s of each work], ...]} (benchmarks/parallelism.py).
    `announce(word)` is called once what the store holds is known, with the run's name (`run_word`)."""
    stream = stream or sys.stderr
    started = time.perf_counter()
    if mode == "retry-failed":
        plan.points = failed_points(plan, group)
    todo, already_done, skipped_failed = select_points(plan, group, mode)
    parts = Parts(group.store.path, group.name)
    word = run_word(mode, already_done, skipped_failed, bool(parts.points()), group.damaged_cells)
    if announce is not None:
        announce(word)
    if group.damaged_cells:
        stream.write(f"seqphase: {group.damaged_cells} points had damaged data ({len(group.repaired)} chunks "
                     "missing or failing their checksum) and are pending again\n")
    if parts.points():  # kept works of points stored since (a driver killed between the two): read the ledger
        parts.prune(stored_hashes(group))
        legacy = parts.drop_legacy()
        if legacy:
            stream.write(f"seqphase: note: {legacy} kept works in the earlier pickle format were removed unread "
                         "(a pickle can run code); their works are recomputed\n")
    run_index = group.start_run({"mode": word, "host": socket.gethostname(), "pid": os.getpid(),
                                 "scheduler": client.scheduler.address, "submitted": len(todo),
                                 "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""),
                                 "overrides": list(plan.sweep.overrides)})
    writer = group.writer()
    writer.mark_pending([(index, point.hash) for point, index in todo])
    meter = Progress(len(todo), stream, enabled=progress)

    def failed(point, reason):  # one line per failed point, whatever the attempts before
        meter.message(f"seqphase: failed {point.params}: {one_line(reason)}")

    tasks = _Tasks(plan, client, todo, retries, writer, parts, submit_ahead, task_log, on_fail=failed)
    try:
        for future in tasks.completed():
            tasks.collect(future)
            if writer.due(flush_s):
                tasks.flush()
            meter.update(tasks.done, tasks.failed)
            tasks.fill()
        tasks.flush()
    except BaseException as exc:
        tasks.cancel()
        try:
            tasks.flush()  # what was computed is kept
        except OSError:
            pass  # the store cannot be written (full, quota, read-only): those points stay pending
        finally:
            try:  # the points this run stored, not the ones it computed (a failed flush stored fewer)
                group.finish_run(run_index, {"done": writer.stored_done, "failed": writer.stored_failed,
                                             "outcome": f"interrupted ({type(exc).__name__})",
                                             **tasks.width.record(), **tasks.failure_record()})
                group.store.consolidate()
            except OSError:
                pass  # the original error is the one to report
            meter.close()
        raise
    meter.close()
    summary = RunSummary(total=len(plan.points), already_done=already_done, skipped_failed=skipped_failed,
                         submitted=len(todo), done=tasks.done, failed=tasks.failed,
                         elapsed_s=time.perf_counter() - started, width=tasks.width.record(), grid=plan.coords)
    group.finish_run(run_index, {"done": tasks.done, "failed": tasks.failed, "outcome": "finished",
                                 "elapsed_s": round(summary.elapsed_s, 3), **summary.width,
                                 **tasks.failure_record()})
    problem = group.store.consolidate()
    if problem:
        stream.write(f"seqphase: note: metadata not consolidated ({problem})\n")
    return summary


def whole_point(plan, point):
    """The task generator of a method without `tasks`: one work, the whole point."""
    params, settings = plan.point_inputs(point)
    kwargs = {"model_name": plan.sweep.model, "method": plan.sweep.method, "params": params,
              "settings": settings, "seed_entropy": plan.sweep.seed, "seed_key": point.seed_key}
    results = yield [Work("point", run_point, kwargs)]
    return results["point"]


class _Point:
    """A point in flight: its task generator, the works of the current stage, their results so far, and
    the works' metadata (runtime, where they ran)."""

    def __init__(self, point, index, generator, split, kept):
        self.point, self.index, self.generator, self.split = point, index, generator, split
        self.kept = kept              # {key: Kept(result, meta)} finished by earlier runs (split points only)
        self.untimed = 0              # kept works whose runtime is not known (kept by an earlier layout)
        self.waiting = set()          # keys of the current stage not finished yet
        self.results = {}             # key -> result, current stage
        self.metas = []
        self.stages = []              # runtime_s of each finished work, per stage (the task log)
        self.over = False             # stored, or recorded failed

    def meta(self):
        """The point's ledger entry from its works' metadata (`combined_meta`); a kept work without its time
        makes the point's total unknown (NaN), not the sum of the others."""
        meta = combined_meta(self.metas)
        if self.untimed and meta:
            meta["runtime_s"] = float("nan")
        return meta


class Width:
    """How wide the run's task graph was, measured: work (CPU-s summed over works), the longest chain of
    works of one point (stages add up; the works of a stage run side by side), the number of works and
    the longest one. Parallelism = work / longest chain: past that many workers, more would idle."""

    def __init__(self):
        self.work_s = self.chain_s = self.longest_s = 0.0
        self.works = self.points = 0

    def add_work(self, runtime_s):
        self.work_s += runtime_s
        self.works += 1
        self.longest_s = max(self.longest_s, runtime_s)

    def add_point(self, chain_s):
        self.points += 1
        self.chain_s = max(self.chain_s, chain_s)

    def record(self):
        if not self.works:
            return {}
        return {"works": self.works, "work_s": round(self.work_s, 3), "chain_s": round(self.chain_s, 3),
                "longest_work_s": round(self.longest_s, 3)}


class _Tasks:
    """Submission of the plan's points as Dask tasks: points cut into works by their generators, works
    batched by measured runtime, a bounded window in flight, lone resubmission of works that raised or of
    batches whose workers died, assembly of finished points and their hand-over to the writer."""

    def __init__(self, plan, client, todo, retries, writer, parts, submit_ahead=0, task_log=None, on_fail=None):
        from distributed import as_completed

        self.plan, self.client, self.retries, self.writer, self.parts = plan, client, retries, writer, parts
        self.submit_ahead, self.task_log = submit_ahead, task_log
        self.model = plan.model
        self.split = self.model.method(plan.sweep.method).tasks is not None
        self.unstarted = iter(todo)
        self.n_unstarted = len(todo)
        self.works_started = self.points_started = 0
        self.queue = collections.deque()  # (point, work, retries, alone)
        self.inflight = {}                # key -> (future, [(point, work)], retries)
        self.finished = as_completed()
        self.runtime_sum, self.runtime_n = 0.0, 0
        self._threads, self._threads_at = 1, -1e9
        self.done = self.failed = 0
        self.stored = []                  # split points handed to the writer since the last flush
        self.width = Width()
        self.on_fail = on_fail            # on_fail(point, reason), once per failed point
        self.tracebacks = []              # {"point": hash, "traceback": text} of the first failed points
        self.fill()

    # -- points -------------------------------------------------------------------------------------
    def start_next(self):
        """Start the next point of the plan (its first stage of works joins the queue); False if none."""
        for point, index in self.unstarted:
            self.n_unstarted -= 1
            self.points_started += 1
            if self.split:
                params, settings = self.plan.point_inputs(point)
                generator = self.model.tasks(self.plan.sweep.method, params, settings,
                                             point_stream(self.plan.sweep.seed, point.seed_key))
                state = _Point(point, index, generator, True, self.parts.load_kept(point.hash))
            else:
                state = _Point(point, index, whole_point(self.plan, point), False, {})
            self.advance(state, None)
            return True
        return False

    def advance(self, state, results):
        """Send the finished stage's results to the point's generator; queue the next stage's works (those
        kept from an earlier run are taken as they are), or store the point when it returns."""
        while True:
            try:
                works = next(state.generator) if results is None else state.generator.send(results)
            except StopIteration as stop:
                self.store(state, stop.value)
                return
            except Exception as exc:  # noqa: BLE001 -- the generator's own error fails the point only
                self.fail(state, f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
                return
            state.stages.append([])
            state.results, state.waiting = {}, set()
            for work in works:
                if work.key in state.kept:
                    kept = state.kept.pop(work.key)
                    state.results[work.key] = kept.result
                    # its time counts in the point's runtime_s (not in this run's width: it ran before)
                    if kept.meta is not None:
                        state.metas.append(kept.meta)
                    else:
                        state.untimed += 1
                else:
                    state.waiting.add(work.key)
                    self.queue.append((state, work, self.retries, False))
                    self.works_started += 1
            if state.waiting:
                return
            results = state.results

    def store(self, state, outputs):
        meta = state.meta()
        if state.split:
            try:
                outputs = check_outputs(self.model, self.plan.sweep.method, self.plan.point_inputs(state.point)[1],
                                        outputs)
            except Exception as exc:  # noqa: BLE001
                self.fail(state, f"{type(exc).__name__}: {exc}", trace=traceback.format_exc())
                return
            self.stored.append(state.point.hash)
        self.writer.done(state.index, state.point.hash, outputs, meta)
        # the point's longest chain: its stages one after another, each as long as its longest work
        self.width.add_point(sum(max(stage, default=0.0) for stage in state.stages))
        if self.task_log:
            with open(self.task_log, "a") as handle:
                handle.write(json.dumps({"point": state.point.hash, "stages": state.stages}) + "\n")
        state.over = True
        self.done += 1

    def fail(self, state, reason, meta=None, trace=""):
        if state.over:
            return
        state.over = True
        self.writer.failed(state.index, state.point.hash, reason, meta or state.meta())
        self.failed += 1
        if trace and len(self.tracebacks) < TRACEBACKS_KEPT:
            self.tracebacks.append({"point": state.point.hash, "traceback": trace[-TRACEBACK_CHARS:]})
        if self.on_fail is not None:
            self.on_fail(state.point, reason)

    def failure_record(self):
        """The run record's part on failures: the tracebacks kept (none: nothing)."""
        return {"tracebacks": self.tracebacks} if self.tracebacks else {}

    # -- results ------------------------------------------------------------------------------------
    def collect(self, future):
        """Take a finished task: each of its works' results goes to its point (kept on disk for split
        points); a work that raised is retried alone, then fails its point."""
        _, items, retries = self.inflight.pop(future.key)
        try:
            result = future.result()
        except Exception as exc:  # a lone work's own error after its retries, or KilledWorker
            if len(items) > 1:
                self.split_batch(items)  # find the work at fault: each alone, with the retries
            else:
                state, work = items[0]
                self.fail(state, _named(state, work, failure_reason(exc)))
        else:
            for (state, work), res in zip(items, [result] if len(items) == 1 else result):
                if "error" not in res:
                    self.finish_work(state, work, res)
                elif retries > 0 and not state.over:
                    self.queue.appendleft((state, work, retries - 1, True))
                else:
                    self.fail(state, _named(state, work, res["error"]), res["meta"], trace=res.get("traceback", ""))
        future.release()

    def finish_work(self, state, work, res):
        runtime = res["meta"]["runtime_s"]
        self.runtime_sum += runtime
        self.runtime_n += 1
        self.width.add_work(runtime)
        state.metas.append(res["meta"])
        state.stages[-1].append(runtime)
        if state.split:
            # kept until the point is stored, also when the point already failed on another work
            self.parts.save(state.point.hash, work.key, res["result"], res["meta"])
        if state.over or work.key not in state.waiting:
            return
        state.waiting.discard(work.key)
        state.results[work.key] = res["result"]
        if not state.waiting:
            self.advance(state, state.results)

    def flush(self):
        """Write the buffered points; then drop the kept works of the split points just stored."""
        self.writer.flush()
        for point_hash in self.stored:
            self.parts.drop(point_hash)
        self.stored = []

    # -- submission ---------------------------------------------------------------------------------
    def completed(self):
        while self.inflight:
            idle = time.perf_counter()
            while not self.finished.has_ready():  # meanwhile, widen the window as workers join (SLURM)
                time.sleep(0.01)
                if time.perf_counter() - idle > 2.0:
                    self.fill()
                    idle = time.perf_counter()
            yield next(self.finished)

    def split_batch(self, items):
        for state, work in reversed(items):
            if not state.over:
                self.queue.appendleft((state, work, self.retries, True))

    def threads(self):
        now = time.perf_counter()
        if now - self._threads_at > 2.0:
            self._threads = max(1, sum(self.client.nthreads().values()))
            self._threads_at = now
        return self._threads

    def remaining_works(self):
        """Works queued plus an estimate for the points not started yet."""
        per_point = self.works_started / self.points_started if self.points_started else 1.0
        return len(self.queue) + self.n_unstarted * per_point

    def batch_size(self):
        if not self.runtime_n:
            return 1
        size = int(TASK_S * self.runtime_n / max(self.runtime_sum, 1e-9))
        share = -(-int(self.remaining_works()) // (2 * self.threads()))  # keep the tail spread over the workers
        return max(1, min(size, MAX_BATCH, share))

    def next_work(self, batchable_only=False):
        """The next queued work of a point still open (starting points as needed), or None."""
        while True:
            while not self.queue:
                if not self.start_next():
                    return None
            if batchable_only and self.queue[0][3]:
                return None
            entry = self.queue.popleft()
            if not entry[0].over:
                return entry

    def fill(self):
        window = max(2 * self.threads() + 2, self.submit_ahead)
        while len(self.inflight) < window:
            entry = self.next_work()
            if entry is None:
                return
            state, work, retries, alone = entry
            items = [(state, work)]
            if not alone:
                size = self.batch_size()
                while len(items) < size:
                    more = self.next_work(batchable_only=True)
                    if more is None:
                        break
                    items.append(more[:2])
            self._submit(items, retries)

    def _submit(self, items, retries):
        # Keys start with words shared by like tasks ("seqphase-gamp-seed-<hash>-seed-3"): the scheduler
        # learns task durations per key prefix, and an adaptive cluster sizes itself from them.
        prefix = f"seqphase-{self.plan.sweep.method}"
        if len(items) == 1:
            state, work = items[0]
            kind = re.sub(r"[^a-z]", "", work.key.split("-")[0].lower()) or "work"
            key = f"{prefix}-{kind}-{state.point.hash}-{work.key}"
            if retries < self.retries:  # a resubmission: a key of its own (the scheduler may still hold the last)
                key += f"-retry-{self.retries - retries}"
            # No Dask retries: the task returns a work's error instead of raising; the driver resubmits it.
            future = self.client.submit(execute_work, work.fn, work.kwargs, key=key, retries=0, pure=False)
        else:
            names = "".join(state.point.hash + work.key for state, work in items)
            key = f"{prefix}-batch-" + hashlib.sha256(names.encode()).hexdigest()[:32]
            # No Dask retries for a batch: its works catch their own errors (retried alone by the driver).
            future = self.client.submit(execute_batch, [(work.fn, work.kwargs) for _, work in items], key=key,
                                        retries=0, pure=False)
        self.inflight[future.key] = (future, items, retries)
        self.finished.add(future)

    def cancel(self):
        self.client.cancel([future for future, _, _ in self.inflight.values()])


def _named(state, work, reason):
    """A failure reason, prefixed with the work for a split point ("seed-3: ValueError: ...")."""
    return f"{work.key}: {reason}" if state.split else reason


def combined_meta(metas):
    """One ledger entry for a point from its works' metadata: runtime summed (CPU-s), the host, worker and
    SLURM job of the first work, with the count of the others where they differ."""
    if not metas:
        return {}
    meta = {"runtime_s": sum(m["runtime_s"] for m in metas)}
    for key in ("host", "worker", "slurm_job_id"):
        values = list(dict.fromkeys(m.get(key, "") for m in metas))
        meta[key] = values[0] if len(values) == 1 else f"{values[0]} +{len(values) - 1}"
    return meta


def one_line(text, width=300):
    """A failure reason on one line of at most `width` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + "..."


def failure_reason(exc):
    name = type(exc).__name__
    if name == "KilledWorker":
        return f"killed: the workers running this point died repeatedly ({exc})"
    return f"{name}: {exc}"


def _notebook(stream):
    """True for a Jupyter kernel's output stream, which redraws a line ended by "\r" as a terminal does
    (ipykernel's OutStream is not a tty)."""
    return "ipykernel" in sys.modules and type(stream).__module__.startswith("ipykernel")


class Progress:
    """A one-line counter on a terminal (a line per 10% elsewhere): done, failed, rate, ETA."""

    def __init__(self, total, stream, enabled=True):
        self.total, self.stream, self.enabled = total, stream, enabled and total > 0
        self.tty = (hasattr(stream, "isatty") and stream.isatty()) or _notebook(stream)
        self.started = time.perf_counter()
        self.last_decile = -1
        self.drawn = 0  # length of the meter's line on a terminal

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
            self.drawn = len(line)
        elif finished * 10 // self.total > self.last_decile:
            self.last_decile = finished * 10 // self.total
            self.stream.write(line + "\n")
            self.stream.flush()

    def message(self, line):
        """Write a line of its own; on a terminal it replaces the meter's line, redrawn at the next update."""
        if self.enabled and self.tty and self.drawn:
            line = "\r" + line.ljust(self.drawn)
        self.stream.write(line + "\n")
        self.stream.flush()
        self.drawn = 0

    def close(self):
        if self.enabled and self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
