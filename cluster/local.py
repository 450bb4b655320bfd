"""Clients for the two backends this version has: an embedded LocalCluster or a scheduler address."""

from __future__ import annotations

import contextlib
import logging
import os

from seqphase.core.errors import ClusterError

# A worker that dies is replaced by its nanny and its tasks are rescheduled; after this many deaths
# while running the same point the point is recorded as failed ("killed") instead of looping forever.
ALLOWED_FAILURES = 3


def _is_address(text):
    return "://" in text or (":" in text and text.rsplit(":", 1)[-1].isdigit())


@contextlib.contextmanager
def connect(cluster="local", workers=None):
    """Yield a Client: `cluster` is "local" (workers = processes, 1 thread each) or "tcp://host:port"."""
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}):
        if cluster == "local":
            n_workers = workers or os.cpu_count() or 1
            if n_workers < 1:
                raise ClusterError("--workers", f"{workers} is not a positive number of workers", "use --workers 2")
            # One thread per process: SE and GAMP are numpy code that holds the GIL between BLAS calls.
            local = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                 dashboard_address=None, silence_logs=logging.ERROR)
            try:
                with Client(local) as client:
                    yield client
            finally:
                local.close()
        elif _is_address(cluster):
            try:
                client = Client(cluster, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise ClusterError("--cluster", f"cannot reach the scheduler at {cluster} ({exc})",
                                   "start it (dask scheduler) or check the address")
            try:
                yield client
            finally:
                client.close()
        else:
            raise ClusterError("--cluster", f"unknown cluster {cluster!r}",
                               "use `local` or the address of a running scheduler, e.g. tcp://127.0.0.1:8786")
