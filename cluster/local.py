"""The default backend: an embedded LocalCluster, started for the run and closed after it."""

from __future__ import annotations

import contextlib
import logging
import os

from seqphase.cluster.base import Backend, worker_config
from seqphase.core.errors import ClusterError


class LocalBackend(Backend):
    """`--cluster local`: `workers` processes (default: one per core), one thread each."""

    name = "local"
    usage = "`local`"

    @contextlib.contextmanager
    def client(self):
        from distributed import Client, LocalCluster

        with worker_config():
            n_workers = self.workers or os.cpu_count() or 1
            if n_workers < 1:
                raise ClusterError("--workers", f"{self.workers} is not a positive number of workers",
                                   "use --workers 2")
            # One thread per process: SE and GAMP are numpy code that holds the GIL between BLAS calls.
            local = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                 dashboard_address=None, silence_logs=logging.ERROR)
            try:
                with Client(local) as client:
                    yield client
            finally:
                local.close()
