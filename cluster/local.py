"""Clients for the backends: an embedded LocalCluster, a scheduler address, or SLURM (cluster/slurm.py)."""

from __future__ import annotations

import contextlib
import logging
import os

from seqphase.core.errors import ClusterError

# glibc returns every large numpy temporary to the OS (mmap/munmap, and Dask's default
# MALLOC_TRIM_THRESHOLD_=64 KiB trims the heap after each free): the page faults that follow made the
# vectorised SE quadratures 2.5x slower (measured: 2.6 ms -> 1.1 ms per channel expectation of the
# |z| channel). Workers keep freed memory for reuse instead; these are set before a worker process
# starts, which is the only time glibc reads them.
WORKER_ENVIRON = {"MALLOC_MMAP_THRESHOLD_": 33554432, "MALLOC_TRIM_THRESHOLD_": 134217728,
                  "OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1, "OPENBLAS_NUM_THREADS": 1}

# A worker that dies is replaced by its nanny and its tasks are rescheduled; after this many deaths
# while running the same point the point is recorded as failed ("killed") instead of looping forever.
ALLOWED_FAILURES = 3


def _is_address(text):
    return "://" in text or (":" in text and text.rsplit(":", 1)[-1].isdigit())


@contextlib.contextmanager
def connect(cluster="local", workers=None, slurm_profile=None):
    """Yield a Client: `cluster` is "local" (workers = processes, 1 thread each), "tcp://host:port", or
    "slurm" (worker jobs described by `slurm_profile`, a `seqphase.cluster.slurm.Profile`)."""
    import dask
    from distributed import Client, LocalCluster

    if cluster == "slurm":
        from seqphase.cluster.slurm import connect_slurm, load_profile

        with connect_slurm(slurm_profile or load_profile()) as client:
            yield client
        return

    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                          "distributed.nanny.pre-spawn-environ": WORKER_ENVIRON}):
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
                               "use `local`, `slurm` or the address of a running scheduler, e.g. tcp://127.0.0.1:8786")
