"""What a worker runs: one point, or a batch of cheap points, timed and labelled with where it ran.

The worker imports only `seqphase.core`; it returns the points' arrays to the driver, which is the only
writer of the store. A batch runs its points one after the other, each exactly as `execute_point` would
(same random stream, its own runtime_s, host, worker, SLURM job id); a point that raises is returned
with its reason and the rest of the batch still runs (the driver retries it alone, then records it).
"""

from __future__ import annotations

import os
import socket
import time


def execute_point(payload):
    """Compute one point from its plain-data payload (see `seqphase.sweeps.planner.payload`)."""
    from seqphase.core.models import run_point

    started = time.perf_counter()
    data = run_point(payload["model"], payload["method"], payload["params"], payload["settings"],
                     payload["seed_entropy"], payload["seed_key"])
    return {"hash": payload["hash"], "data": data, "meta": _meta(time.perf_counter() - started)}


def execute_batch(common, points):
    """Compute several points: `common` holds what they share (model, method, settings, seed), each of
    `points` its params, seed_key and hash. Returns one result per point, in order; a point that raised
    comes back as {"hash", "error": "<Exception>: <message>", "meta"}."""
    results = []
    for point in points:
        started = time.perf_counter()
        try:
            result = execute_point({**common, **point})
        except Exception as exc:  # noqa: BLE001 -- recorded per point; the batch goes on
            result = {"hash": point["hash"], "error": error_text(exc), "meta": _meta(time.perf_counter() - started)}
        results.append(result)
    return results


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
