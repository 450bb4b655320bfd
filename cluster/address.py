"""The backend of an existing Dask scheduler, given by its address (`--cluster tcp://host:8786`, or
`tls://host:8786` with credentials: security.py)."""

from __future__ import annotations

import contextlib

from seqphase.cluster.base import Backend, worker_config
from seqphase.core.errors import ClusterError


class AddressBackend(Backend):
    """`--cluster tcp://host:port` (or host:port): attach to a running scheduler; its workers are its own."""

    name = "address"
    starts_scheduler = False
    usage = "the address of a running scheduler, e.g. tcp://127.0.0.1:8786"

    @classmethod
    def recognises(cls, cluster):
        return "://" in cluster or (":" in cluster and cluster.rsplit(":", 1)[-1].isdigit())

    @contextlib.contextmanager
    def client(self):
        from distributed import Client

        with worker_config():
            try:
                client = Client(self.cluster, timeout="20s", security=self.security)
            except (OSError, TimeoutError, ValueError) as exc:  # ValueError: a scheme Dask cannot dial (file://)
                raise ClusterError("--cluster", f"cannot reach the scheduler at {self.cluster} ({exc})",
                                   "start it (dask scheduler) or check the address")
            try:
                yield client
            finally:
                client.close()
