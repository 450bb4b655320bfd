"""Shared fixtures: the toy user model on the workers' path and a real LocalCluster."""

import contextlib
import os
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# Workers are separate processes: they find the toy model through PYTHONPATH, set before any cluster.
os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


@pytest.fixture(scope="session")
def marker_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("toymarkers")
    os.environ["TOYMODEL_MARKERS"] = str(path)
    return path


@contextlib.contextmanager
def environ_without(names):
    saved = {name: os.environ.pop(name) for name in names if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


@pytest.fixture(scope="session")
def client(marker_dir, tmp_path_factory):
    """A real distributed LocalCluster with 2 worker processes, shared by the integration tests. Like every
    cluster seqphase starts it speaks TLS only; its credentials are written to a 0700 folder named in Dask's
    configuration, so tests attach to it by address (`--cluster tls://...`) as a user with them would, and
    `cli_run.cli_here` runs attach to it in this process. Like every cluster seqphase starts without a
    dashboard, its Dask diagnostics are quiet (cluster/base.py QUIET_DIAGNOSTICS). The worker
    environment this process inherits (pytest_configure) is hidden while it starts, so that its workers have it
    only from the backend's configuration, which test_engine.py checks."""
    import dask

    from seqphase.cluster import connect
    from seqphase.cluster.base import WORKER_ENVIRON
    from seqphase.cluster.security import credentials_config, write_credentials

    with contextlib.ExitStack() as stack:
        with environ_without(WORKER_ENVIRON):
            client = stack.enter_context(connect("local", workers=2))
        folder = tmp_path_factory.mktemp("tls")
        os.chmod(folder, 0o700)
        write_credentials(client.security, folder)
        with dask.config.set(credentials_config(folder)):
            yield client


# -- parallel runs (pytest-xdist, `-n 2 --dist loadgroup` in pyproject's addopts) ------------------------
# Tests are independent, so any worker may run any test, with two exceptions grouped here, whatever the
# test file says: the tests of one module that share a module- (or class-/package-) scoped fixture run on
# one worker, so that the fixture (often a whole sweep) is computed once; and every test that uses the
# private SLURM (`slurm`, tests/slurm/conftest.py) runs on one worker, so one SLURM is started per run and
# its tests, which count the cluster's jobs, never see another test's jobs (they mostly wait for jobs, which
# the other worker's tests overlap). xdist hands out the groups first, largest first, then single tests.
SERIAL_FIXTURES = {"slurm": "slurm"}


def pytest_configure(config):
    """On the xdist controller, before it starts the workers (they inherit the environment): the Dask
    workers' environment (cluster/base.py WORKER_ENVIRON), so that the tests which compute in the test
    process do so as a worker would. One BLAS thread per process: two workers with OpenBLAS's default thread
    per core oversubscribe the cores, and its spinning threads made tests up to 8x slower. glibc's malloc
    keeping freed memory: with its defaults the vectorised quadratures' page faults cost more system
    time (tests/aim/test_aim_se.py with tests/quadratic/test_erm_se.py: 10.6 -> 3.1 CPU-s of it)."""
    if getattr(config.option, "numprocesses", None):
        from seqphase.cluster.base import WORKER_ENVIRON

        for var, value in WORKER_ENVIRON.items():
            os.environ.setdefault(var, str(value))


def _xdist_group(item):
    infos = getattr(item, "_fixtureinfo", None)
    if infos is None:
        return None
    for name, group in SERIAL_FIXTURES.items():
        if name in infos.names_closure:
            return group
    for name in infos.names_closure:
        defs = infos.name2fixturedefs.get(name)
        if defs and defs[-1].scope in ("module", "class", "package"):
            return item.nodeid.split("::")[0]
    return None


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    worker = getattr(config, "workerinput", None) is not None
    if worker:  # before xdist reads the marks
        for item in items:
            group = _xdist_group(item)
            if group:
                item.add_marker(pytest.mark.xdist_group(group))
    result = yield
    if worker and config.getvalue("loadgroup"):
        # xdist schedules by node id: it appends "@group" to a marked test's id. pytest-xdist 3.8 sets
        # item._nodeid, which pytest >= 9.2 no longer reads: without this the groups would be ignored.
        for item in items:
            marks = {str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                     for mark in item.iter_markers("xdist_group")}
            if marks and "@" not in item.nodeid.rpartition("]")[2]:
                suffix = "@" + "_".join(sorted(marks))
                if hasattr(item, "_id"):
                    item._id = type(item._id).parse(item.nodeid + suffix)
                if not item.nodeid.endswith(suffix):
                    raise pytest.UsageError(f"cannot put {item.nodeid} in its xdist group {suffix}")
    return result


def pytest_sessionfinish(session):
    """On an xdist worker: hand the SLURM tests' skip reason and timings to the controller's summary."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["seqphase_slurm_skipped"] = getattr(session.config, "_seqphase_slurm_skipped", None)
        output["seqphase_slurm_timings"] = dict(getattr(session.config, "_seqphase_slurm_timings", {}) or {})


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    output = getattr(node, "workeroutput", None) or {}
    if output.get("seqphase_slurm_skipped"):
        node.config._seqphase_slurm_skipped = output["seqphase_slurm_skipped"]
    if output.get("seqphase_slurm_timings"):
        timings = getattr(node.config, "_seqphase_slurm_timings", None) or {}
        timings.update(output["seqphase_slurm_timings"])
        node.config._seqphase_slurm_timings = timings


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = getattr(config, "_seqphase_slurm_skipped", None)
    if skipped:
        terminalreporter.write_line(f"SLURM tests skipped: {skipped}")
    timings = getattr(config, "_seqphase_slurm_timings", None)
    if timings:
        terminalreporter.write_sep("-", "SLURM timings")
        for name, value in timings.items():
            terminalreporter.write_line(f"{name}: {value:.1f} s")
