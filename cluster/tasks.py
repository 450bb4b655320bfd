"""What a worker runs: one point, timed and labelled with where it ran.

The worker imports only `seqphase.core`; it returns the point's arrays to the driver, which is the only
writer of the store.
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
    try:
        from distributed import get_worker

        worker = get_worker().address
    except (ImportError, ValueError):
        worker = ""
    meta = {"runtime_s": time.perf_counter() - started, "host": socket.gethostname(), "worker": worker,
            "slurm_job_id": os.environ.get("SLURM_JOB_ID", "")}
    return {"hash": payload["hash"], "data": data, "meta": meta}
