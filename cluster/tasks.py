"""What a worker runs: one work of a point (a whole point, a seed, a Monte-Carlo block, a probe), or a
batch of cheap works, timed and labelled with where it ran.

A work is `fn(**kwargs)` (`seqphase.core.models.Work`); the worker imports only `seqphase.core` and
returns the results to the driver, which assembles points and is the only writer of the store. A batch
runs its works one after the other, each exactly as `execute_work` would (same random stream, its own
runtime_s, host, worker, SLURM job id). A work that raises comes back as a record, its reason and its
traceback, and the rest of a batch still runs: the driver retries the work alone, then records its point
as failed. So no task of a sweep ever fails in Dask's eyes, and Dask logs no failure of its own.
"""

from __future__ import annotations

import os
import socket
import time
import traceback


def execute_work(fn, kwargs):
    """Run one work: {"result", "meta"}, or {"error": "<Exception>: <message>", "traceback", "meta"} when
    it raises."""
    started = time.perf_counter()
    try:
        result = fn(**kwargs)
    except Exception as exc:  # noqa: BLE001 -- returned to the driver, which retries, then records it
        return {"error": error_text(exc), "traceback": traceback_text(exc),
                "meta": _meta(time.perf_counter() - started)}
    return {"result": result, "meta": _meta(time.perf_counter() - started)}


def execute_batch(works):
    """Run several works, given as (fn, kwargs) pairs: one `execute_work` entry per work, in order."""
    return [execute_work(fn, kwargs) for fn, kwargs in works]


def traceback_text(exc):
    """The traceback of `exc` from the work's own function down (the frame of execute_work left out)."""
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    return "".join(traceback.format_exception(type(exc), exc, tb))


def execute_point(payload):
    """Compute one whole point from its plain-data payload (`seqphase.sweeps.planner.payload`)."""
    from seqphase.core.models import run_point

    started = time.perf_counter()
    data = run_point(payload["model"], payload["method"], payload["params"], payload["settings"],
                     payload["seed_entropy"], payload["seed_key"])
    return {"hash": payload["hash"], "data": data, "meta": _meta(time.perf_counter() - started)}


def load_model(model):
    """Import a model's family on this worker (`seqphase.api.execute` sends one per worker of a cluster it
    started, while the driver prepares the store). Returns None, or the error's text: the first work
    meets the same error and reports it with its point."""
    from seqphase.core.models import get_model

    try:
        get_model(model)
    except Exception as exc:  # noqa: BLE001 -- reported by the works that need the model
        return error_text(exc)
    return None


def error_text(exc):
    return f"{type(exc).__name__}: {exc}"


def _meta(runtime_s):
    try:
        from distributed import get_worker

        worker = get_worker().address
    except (ImportError, ValueError):
        worker = ""
    return {"runtime_s": runtime_s, "host": socket.gethostname(), "worker": worker,
            "slurm_job_id": os.environ.get("SLURM_JOB_ID", "")}
