"""What a worker runs: one work of a point (a whole point, a seed, a Monte-Carlo block, a probe), or a
batch of cheap works, timed and labelled with where it ran.

A work is `fn(**kwargs)` (`seqphase.core.models.Work`); the worker imports only `seqphase.core` and
returns the results to the driver, which assembles points and is the only writer of the store. A batch
runs its works one after the other, each exactly as `execute_work` would (same random stream, its own
runtime_s, host, worker, SLURM job id); a work that raises comes back with its reason and the rest of
the batch still runs (the driver retries it alone, then records its point as failed).
"""

from __future__ import annotations

import os
import socket
import time


def execute_work(fn, kwargs):
    """Run one work; its exception propagates (so Dask's retries apply to a lone task)."""
    started = time.perf_counter()
    result = fn(**kwargs)
    return {"result": result, "meta": _meta(time.perf_counter() - started)}


def execute_batch(works):
    """Run several works, given as (fn, kwargs) pairs. Returns one entry per work, in order:
    {"result", "meta"} or {"error": "<Exception>: <message>", "meta"}."""
    results = []
    for fn, kwargs in works:
        started = time.perf_counter()
        try:
            results.append(execute_work(fn, kwargs))
        except Exception as exc:  # noqa: BLE001 -- recorded per work; the batch goes on
            results.append({"error": error_text(exc), "meta": _meta(time.perf_counter() - started)})
    return results


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
