"""The default backend: an embedded LocalCluster, started for the run and closed after it."""

from __future__ import annotations

import contextlib
import copy
import logging
import os

from seqphase.cluster.base import Backend, diagnostics_config, worker_config
from seqphase.cluster.security import LOCALHOST
from seqphase.core.errors import ClusterError


class LocalBackend(Backend):
    """`--cluster local`: `workers` processes (default: one per core), one thread each."""

    name = "local"
    usage = "`local`"

    @contextlib.contextmanager
    def client(self):
        import dask
        from distributed import Client, LocalCluster

        with worker_config():
            n_workers = self.workers or os.cpu_count() or 1
            if n_workers < 1:
                raise ClusterError("--workers", f"{self.workers} is not a positive number of workers",
                                   "use --workers 2")
            # One thread per process: SE and GAMP are numpy code that holds the GIL between BLAS calls.
            # TLS with in-memory credentials unless --insecure-no-tls (security.py); dashboard only on request.
            # The diagnostics are read as the scheduler and the nannies are made: set for that only, not for
            # the rest of this process. Each nanny gets its own deep copy of the configuration to hand to the
            # worker processes it starts and restarts: by default it keeps a shallow copy, whose nested settings
            # are this process's own and so back at Dask's defaults once the `with` ends, and a worker restarted
            # after a crash would come up with the profiler on.
            with dask.config.set(diagnostics_config(self.access.dashboard)):
                local = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host=LOCALHOST,
                                     silence_logs=logging.ERROR, config=copy.deepcopy(dask.config.config),
                                     **self.access.local_kwargs())
            try:
                self.access.announce_dashboard(local.dashboard_link if self.access.dashboard else None)
                with Client(local) as client:
                    yield client
            finally:
                local.close()
