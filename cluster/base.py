"""What the backends share: the worker environment, the failure limit, the `Backend` contract, and
`connect()`, which picks the backend for a `--cluster` value from `BACKENDS`.

Each backend lives in its own module (local.py, address.py, slurm.py) and imports only this one, so a
backend can be added or changed without touching another.
"""

from __future__ import annotations

import contextlib

from seqphase.core import registry
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


#: Dask's periodic diagnostics on the clusters seqphase starts, unless the dashboard is served (their only
#: reader): the workers' sampling profiler (a stack sample every 10 ms) off, the event-loop tick every 1 s
#: instead of 20 ms, the system monitor every 5 s instead of 0.5 s. With Dask's defaults the scheduler's
#: thread in the driver took ~0.1 of a core all through a run and the workers' profilers a share of theirs:
#: `seqphase run smi-2layer-se --workers 2` took 70.5 / 73.6 s with Dask's defaults, 64.9 / 67.4 s with these
#: (runs alternated, SE version 9 before the workers' early model import; docs/howto/slurm.md).
QUIET_DIAGNOSTICS = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
                     "distributed.admin.system-monitor.interval": "5s"}


def diagnostics_config(dashboard):
    """The Dask configuration of a cluster's diagnostics: Dask's defaults with the dashboard, else
    QUIET_DIAGNOSTICS."""
    return {} if dashboard else dict(QUIET_DIAGNOSTICS)


def worker_config():
    """The Dask configuration of the local and address backends (the SLURM profile sets its own)."""
    import dask

    return dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                            "distributed.nanny.pre-spawn-environ": WORKER_ENVIRON})


class Backend:
    """One way of getting workers. A subclass sets `name` and `usage` (how the unknown-cluster message
    names the values it accepts), recognises its `--cluster` values, and yields a Client from `client()`."""

    name = ""
    usage = ""
    starts_scheduler = True  # False: attaches to a running one (its security is the user's)

    def __init__(self, cluster, workers=None, slurm_profile=None, access=None, security=None):
        from seqphase.cluster.security import Access

        self.cluster = cluster
        self.workers = workers
        self.slurm_profile = slurm_profile
        self.access = access or Access()
        self.security = security  # the client's credentials for an address (Access.check)

    @classmethod
    def recognises(cls, cluster):
        return cluster == cls.name

    @contextlib.contextmanager
    def client(self):  # pragma: no cover - the contract
        raise NotImplementedError
        yield


# The backends, in the order the unknown-cluster message lists them. They are imported when
# `connect()` looks a value up, as "module:Class" (core/registry.py), because each of them imports this module.
BACKENDS = {
    "local": "seqphase.cluster.local:LocalBackend",
    "slurm": "seqphase.cluster.slurm:SlurmBackend",
    "address": "seqphase.cluster.address:AddressBackend",
}


def backend_class(name):
    return registry.resolve(BACKENDS[name], "--cluster", error=ClusterError)


def backend_for(cluster):
    """The Backend class whose `--cluster` values include `cluster` (a ClusterError if none does)."""
    classes = [backend_class(name) for name in BACKENDS]
    for cls in classes:
        if cls.recognises(cluster):
            return cls
    usages = [cls.usage for cls in classes]
    raise ClusterError("--cluster", f"unknown cluster {cluster!r}",
                       "use " + ", ".join(usages[:-1]) + " or " + usages[-1])


@contextlib.contextmanager
def connect(cluster="local", workers=None, slurm_profile=None, access=None):
    """Yield a Client: `cluster` is "local" (workers = processes, 1 thread each), "tcp://host:port" or
    "tls://host:port", or "slurm" (worker jobs described by `slurm_profile`, a
    `seqphase.cluster.slurm.Profile`). `access` (a `seqphase.cluster.security.Access`): TLS is on for
    every scheduler started here unless `access.insecure`; credentials for a tls:// address; dashboard.
    Options that do not apply, or bad credentials, are refused before anything starts."""
    from seqphase.cluster.security import Access

    cls = backend_for(cluster)
    access = access or Access()
    security = access.check(cluster, cls.starts_scheduler)
    backend = cls(cluster, workers=workers, slurm_profile=slurm_profile, access=access, security=security)
    with backend.client() as client:
        yield client
