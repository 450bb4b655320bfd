"""The path spec -> Dask -> store on a real distributed LocalCluster, including its faults."""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import xarray as xr

from spec_files import write_spec
from seqphase.cluster import run_sweep
from seqphase.results.store import DONE, FAILED, Store
from seqphase.sweeps.planner import plan_sweep
from seqphase.sweeps.spec import load_sweep


def run(tmp_path, client, store="s.zarr", mode="resume", retries=2, **spec):
    plan = plan_sweep(load_sweep(str(write_spec(tmp_path, **spec))))
    group = Store(tmp_path / store).prepare(plan)
    return run_sweep(plan, group, client, mode=mode, retries=retries, progress=False), group


def test_sweep_resumes_and_grows(tmp_path, client):
    summary, _ = run(tmp_path, client)
    assert (summary.submitted, summary.done, summary.failed) == (4, 4, 0)
    again, _ = run(tmp_path, client)
    assert (again.submitted, again.already_done) == (0, 4)
    grown, group = run(tmp_path, client, alpha=[0.5, 3.0])
    assert (grown.submitted, grown.already_done) == (1, 1)
    ds = xr.open_zarr(str(group.store.path), group="toy", consolidated=False).sortby("alpha")
    alphas = ds["alpha"].values
    assert np.allclose(ds["overlap"].values.ravel(), alphas / (1 + alphas))
    assert (ds["status"].values == DONE).all() and (ds["attempts"].values == 1).all()
    runs = ds.attrs["runs"]
    assert [r["submitted"] for r in runs] == [4, 0, 1] and all(r["outcome"] == "finished" for r in runs)


def test_seeds_are_reproducible(tmp_path, client):
    run(tmp_path, client, store="a.zarr")
    run(tmp_path, client, store="b.zarr")
    a = xr.open_zarr(str(tmp_path / "a.zarr"), group="toy", consolidated=False)["noise"].values
    b = xr.open_zarr(str(tmp_path / "b.zarr"), group="toy", consolidated=False)["noise"].values
    assert np.array_equal(a, b) and np.unique(a).size == a.size


def test_raising_task_is_retried_then_recorded_failed(tmp_path, client, marker_dir):
    # "once" fails on its first attempt only: the driver's retry absorbs it.
    summary, _ = run(tmp_path, client, store="once.zarr", alpha=[0.11, 0.12], extra_params='fail = "once"')
    assert (summary.done, summary.failed) == (2, 0)
    # "always" exhausts the retries: recorded failed with its reason, the rest of the sweep finishes.
    summary, group = run(tmp_path, client, store="mixed.zarr", alpha=[0.5, 1.0],
                         extra_params='fail = ["never", "always"]')
    assert (summary.done, summary.failed) == (2, 2)
    status = group.ledger()[0]
    errors = group.group["error"][...]
    assert (status[:, 1, 0, 0] == FAILED).all() and (status[:, 0, 0, 0] == DONE).all()
    assert all("RuntimeError: injected failure" in e for e in errors[:, 1, 0, 0])
    assert (group.group["attempts"][...][:, 1, 0, 0] == 1).all()
    # A plain rerun leaves recorded failures alone; retry-failed reruns exactly those.
    again, _ = run(tmp_path, client, store="mixed.zarr", alpha=[0.5, 1.0], extra_params='fail = ["never", "always"]')
    assert (again.submitted, again.skipped_failed) == (0, 2)
    retried, group = run(tmp_path, client, store="mixed.zarr", mode="retry-failed", alpha=[0.5, 1.0],
                         extra_params='fail = ["never", "always"]')
    assert (retried.submitted, retried.failed) == (2, 2)
    assert (group.group["attempts"][...][:, 1, 0, 0] == 2).all()


def test_retry_failed_recovers_transient_failures(tmp_path, client, marker_dir):
    summary, group = run(tmp_path, client, retries=0, alpha=[0.21, 0.22, 0.23], extra_params='fail = "once"')
    assert summary.failed == 3
    retried, group = run(tmp_path, client, mode="retry-failed", retries=0, alpha=[0.21, 0.22, 0.23],
                         extra_params='fail = "once"')
    assert (retried.submitted, retried.done, retried.failed) == (3, 3, 0)
    assert (group.ledger()[0] == DONE).all()


def test_killed_worker_loses_no_point(tmp_path, client):
    """SIGKILL a worker process mid-sweep: its points are rescheduled, every point is stored once."""
    pids = list(client.run(os.getpid).values())
    assert len(pids) == 2

    def kill_one_worker_soon():
        time.sleep(1.5)
        os.kill(pids[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_one_worker_soon)
    killer.start()
    summary, group = run(tmp_path, client, alpha="0.1:1.2:12", extra_params="sleep = 0.4")
    killer.join()
    assert (summary.done, summary.failed) == (12, 0)
    assert (group.ledger()[0] == DONE).all()
    assert (group.group["attempts"][...] == 1).all()
    client.wait_for_workers(2, timeout=60)
    assert pids[0] not in client.run(os.getpid).values()  # the nanny replaced the killed process
    # the replacement has the cluster's quiet diagnostics, not Dask's defaults
    assert set(client.run(_diagnostics).values()) == {(False, "1s")}


class _LostOnce:
    """A real future that reports status "lost" once, as one does when the worker holding its finished
    result dies between as_completed yielding it and the driver reading it."""

    def __init__(self, future):
        self._future, self._told = future, False

    @property
    def status(self):
        if not self._told:
            self._told = True
            return "lost"
        return self._future.status

    def __getattr__(self, name):
        return getattr(self._future, name)


def test_result_lost_after_completion_is_not_recorded_failed(tmp_path, client, monkeypatch):
    """The driver gathers each result whatever its momentary status: a finished point whose data is lost
    (and recomputed by the scheduler) is stored as done, not as failed."""
    import distributed

    class LostOnceCompleted(distributed.as_completed):
        def __next__(self):
            return _LostOnce(super().__next__())

    monkeypatch.setattr(distributed, "as_completed", LostOnceCompleted)
    summary, group = run(tmp_path, client, alpha=[0.31, 0.32, 0.33])
    assert (summary.done, summary.failed) == (3, 0)
    assert (group.ledger()[0] == DONE).all()


def test_killed_driver_resumes_without_duplicates(tmp_path):
    """SIGKILL the whole `seqphase run` process mid-sweep, rerun: only the missing points run."""
    spec = write_spec(tmp_path, alpha="0.1:3.2:32", extra_params="sleep = 0.5")
    store = tmp_path / "driver.zarr"
    cmd = [sys.executable, "-m", "seqphase.cli", "run", str(spec), "--store", str(store), "--workers", "2",
           "--no-progress"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    done_before = 0
    while time.time() < deadline:
        time.sleep(0.5)
        try:
            done_before = int((Store(store).open_sweep("toy").ledger()[0] == DONE).sum())
        except Exception:
            continue
        if done_before >= 4:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    group = Store(store).open_sweep("toy")
    done_before = int((group.ledger()[0] == DONE).sum())
    assert 4 <= done_before < 32
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    group = Store(store).open_sweep("toy")
    assert (group.ledger()[0] == DONE).all()
    # No point is computed twice, except possibly those of the flush the SIGKILL interrupted (their data
    # and attempts landed, their done flags did not): those are correctly recomputed. A flush holds the
    # points finished in one flush interval (1 s, stretched to 10 flush times when flushing is slow, as
    # fsync is on a loaded machine): 2 workers x 2 s / 0.5 s per point = 8 allows flushes of 0.2 s.
    attempts = group.group["attempts"][...]
    assert attempts.max() <= 2 and (attempts == 2).sum() <= 8
    runs = group.attrs["runs"]
    assert runs[-1]["submitted"] == 32 - done_before
    assert "outcome" not in runs[0]  # the killed run never finished
    assert f"{32 - done_before} computed, 0 failed, {done_before} already done" in out.stderr


def test_workers_get_the_allocator_settings(client):
    """The glibc settings that keep SE quadratures fast must reach the worker processes."""
    values = client.run(lambda: os.environ.get("MALLOC_MMAP_THRESHOLD_"))
    assert set(values.values()) == {"33554432"}


def _diagnostics():
    import dask

    return dask.config.get("distributed.worker.profile.enabled"), dask.config.get("distributed.admin.tick.interval")


def test_workers_run_without_dask_diagnostics_unless_the_dashboard_is_served(client):
    """A local cluster started without --dashboard sets Dask's diagnostics quiet in its scheduler and in its
    workers (cluster/base.py QUIET_DIAGNOSTICS: the 10 ms sampling profiler off, slow tick and system
    monitor), for its start only; with the dashboard they keep Dask's defaults, which its pages read. The
    session cluster (`client`) is one of the first kind: `connect("local")`, as every `seqphase run`."""
    import dask

    from seqphase.cluster import connect
    from seqphase.cluster.security import Access

    assert set(client.run(_diagnostics).values()) == {(False, "1s")}
    assert dask.config.get("distributed.worker.profile.enabled") is True  # not left set in this process
    with connect("local", workers=1, access=Access(dashboard=True)) as served:
        assert set(served.run(_diagnostics).values()) == {(True, "20ms")}


def test_load_model_reports_an_unimportable_model_as_text():
    """`cluster.tasks.load_model` (the early import on a run's own workers) never raises: a model that
    cannot be imported comes back as its error's text, for the first work to meet again and record with
    its point; a shipped family loads and returns None."""
    from seqphase.cluster.tasks import load_model

    assert load_model("glm") is None
    text = load_model("no_such_module_here:Model")
    assert text.startswith("ParameterError") and "no_such_module_here" in text
