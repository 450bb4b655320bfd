"""The default backend: an embedded LocalCluster, started for the run and closed after it.

Its worker processes are started by multiprocessing's `spawn`: each one imports the main script again
before it runs anything. A script that starts the cluster at its top level, outside
`if __name__ == "__main__":`, would start it again in every worker, which multiprocessing refuses with a
traceback per worker; `check_main_guard` names the fix in one line before anything starts.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import logging
import os
import sys

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

        check_main_guard()
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
                    with contextlib.suppress(Exception):  # the run is over, the cluster closes
                        client.run(quiet_close, on_error="ignore")
            finally:
                local.close()


def quiet_close():
    """Run on each worker once the run is over: a heartbeat that fails because the cluster is closing is
    not logged. (A worker's heartbeat can meet a scheduler that has already let it go; Dask logs that at
    ERROR level with its traceback, after a run that went well.)"""
    logging.getLogger("distributed.worker").addFilter(_not_a_closing_heartbeat)


def _not_a_closing_heartbeat(record):
    return not record.getMessage().startswith("Failed to communicate with scheduler during heartbeat")


def check_main_guard():
    """End the process with one line when the local cluster is being started from the top level of a main
    script that its worker processes will import again (no `if __name__ == "__main__":` around the call).

    That call cannot go on: every worker would run the script, start a cluster of its own, and fail. It
    is at the top level of the script, so an exception would end the script too, after a traceback; the
    line says what to change instead."""
    where = unguarded_call()
    if where is not None:
        raise SystemExit(f"seqphase: error: {where}: the local cluster is started at the top level of the script, "
                         "which each of its worker processes runs again as it starts (fix: put the call under "
                         "`if __name__ == \"__main__\":`)")


def unguarded_call():
    """"FILE, line N" of the top-level statement of the main script that leads here, when that script is
    imported again by spawned processes and the statement is not under `if __name__ ...:`; else None."""
    import dask

    if dask.config.get("distributed.worker.multiprocessing-method", "spawn") == "fork":
        return None  # a forked worker does not import the script
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if path is None or (name is not None and (name == "__main__" or name.endswith(".__main__"))):
        return None  # what multiprocessing does not import again: a notebook, `python -c`, a package's __main__
    frame = sys._getframe(1)
    line = None
    while frame is not None:  # the outermost statement of the script on the stack
        if frame.f_globals is vars(main) and frame.f_code.co_name == "<module>":
            line = frame.f_lineno
        frame = frame.f_back
    if line is None:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return None  # cannot tell: let it start
    for node in tree.body:
        if isinstance(node, ast.If) and node.lineno <= line <= node.end_lineno and \
                any(isinstance(n, ast.Name) and n.id == "__name__" for n in ast.walk(node.test)):
            return None
    return f"{os.path.basename(path)}, line {line}"
