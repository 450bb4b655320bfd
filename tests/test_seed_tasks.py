"""Points cut into works (seeds as tasks) on a real distributed LocalCluster: the works spread over the
workers, the stored values equal the serial run bit for bit, and no finished work is lost to a failing
seed, a killed worker or a killed driver."""

import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import numpy as np

from spec_files import write_spec
from seqphase.cluster import run_sweep
from seqphase.core.models import check_outputs, get_model, point_stream
from seqphase.results.parts import FOLDER, Parts
from seqphase.results.store import DONE, FAILED, Store
from seqphase.sweeps.planner import plan_sweep
from seqphase.sweeps.spec import load_sweep


def plan_of(tmp_path, **spec):
    return plan_sweep(load_sweep(str(write_spec(tmp_path, method="seeded", **spec))))


def run(tmp_path, client, store="s.zarr", mode="resume", retries=2, **spec):
    plan = plan_of(tmp_path, **spec)
    group = Store(tmp_path / store).prepare(plan)
    return run_sweep(plan, group, client, mode=mode, retries=retries, progress=False), group, plan


def serial(plan, point):
    """The point computed in this process by `Method.run` (the seeds one after the other)."""
    model = get_model(plan.sweep.model)
    params, settings = plan.point_inputs(point)
    out = model.run("seeded", params, settings, point_stream(plan.sweep.seed, point.seed_key))
    return check_outputs(model, "seeded", settings, out)


def stored(group, point, name):
    return group.read(name)[group.index_of(point)]


def last_run(group):
    """The run record of the last run (re-read: the group's attrs were loaded before it)."""
    return Store(group.store.path).open_sweep(group.name).attrs["runs"][-1]


def assert_same_as_serial(plan, group, point):
    expected = serial(plan, point)
    for name in ("noise", "value"):
        assert np.array_equal(stored(group, point, name), expected[name]), name


def test_seeds_of_one_point_run_on_every_worker_and_equal_the_serial_run(tmp_path, client):
    summary, group, plan = run(tmp_path, client, alpha=[0.7], extra_params="sleep = 0.4",
                               method_extra="n_seeds = 6")
    assert (summary.done, summary.failed) == (1, 0)
    point = plan.points[0]
    assert len(set(stored(group, point, "pid").tolist())) == 2  # one point, both workers
    assert_same_as_serial(plan, group, point)
    width = last_run(group)
    assert width["works"] == 7  # 6 seeds and the shared work
    assert width["chain_s"] < 0.5 * width["work_s"]  # seeds side by side, not one after another
    assert stored(group, point, "runtime_s") >= 6 * 0.4  # the point's CPU time, summed over its works
    assert not Parts(group.store.path, "toy").points()  # dropped once the point is stored


def test_failing_seed_fails_its_point_keeps_the_other_seeds_and_retry_computes_it_alone(tmp_path, client,
                                                                                         marker_dir, capsys):
    summary, group, plan = run(tmp_path, client, retries=0, alpha=[0.31, 0.32], extra_params='fail = "once"')
    assert (summary.done, summary.failed) == (0, 2)
    errors = group.read("error").ravel()
    assert all(e.startswith("seed-1: RuntimeError: injected one-off failure of seed 1") for e in errors)
    for point in plan.points:
        assert sorted(Parts(group.store.path, "toy").load(point.hash)) == ["seed-0", "seed-2", "seed-3", "shared"]
    # `seqphase status` reports the kept works of the points not stored
    from seqphase.cli import main

    assert main(["status", "toy", "--store", str(group.store.path)]) == 0
    out = capsys.readouterr().out
    assert "works kept of points not stored yet: 8 in 2 points (" in out
    assert all(f"{point.hash[:12]}: 4" in out for point in plan.points)
    # each kept work carries its time; the second point's seed 0 is replaced by a file of the earlier pickle
    # layout, one that would run code if unpickled: it is never opened, and its work is recomputed
    kept_s = [sum(k.meta["runtime_s"] for k in Parts(group.store.path, "toy").load_kept(p.hash).values())
              for p in plan.points]
    assert all(s > 0 for s in kept_s)
    folder = tmp_path / "s.zarr" / FOLDER / "toy" / plan.points[1].hash
    (folder / "seed-0.npz").unlink()
    ran = tmp_path / "unpickled"
    (folder / "seed-0.pkl").write_bytes(pickle.dumps(_Marker(str(ran))))
    assert "seed-0" not in Parts(group.store.path, "toy").load_kept(plan.points[1].hash)
    retried, group, plan = run(tmp_path, client, mode="retry-failed", retries=0, alpha=[0.31, 0.32],
                               extra_params='fail = "once"')
    assert (retried.done, retried.failed) == (2, 0)
    assert last_run(group)["works"] == 3  # seed 1 of each point and the second point's seed 0, nothing else
    assert not ran.exists()
    assert (group.ledger()[0] == DONE).all()
    for point in plan.points:
        assert_same_as_serial(plan, group, point)
    # runtime_s: the kept works' time plus this run's work on the point
    first, second = (float(stored(group, p, "runtime_s")) for p in plan.points)
    assert first > kept_s[0] and first - kept_s[0] <= last_run(group)["work_s"] + 1e-3  # the record rounds to ms
    assert second > 0


class _Marker:
    """Unpickling it creates a file: a kept-work file that runs code if anything unpickles it."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_seed_that_always_fails_is_recorded_and_other_points_are_stored(tmp_path, client):
    summary, group, plan = run(tmp_path, client, retries=1, alpha=[0.5, 1.5],
                               extra_params='fail = ["never", "always"]')
    assert (summary.done, summary.failed) == (2, 2)
    status, errors = group.ledger()[0], group.read("error")
    assert (status[:, 0] == DONE).all() and (status[:, 1] == FAILED).all()
    assert all(e.startswith("seed-1: RuntimeError: injected failure of seed 1") for e in errors[:, 1].ravel())


def test_killed_worker_mid_seed_loses_nothing(tmp_path, client):
    pids = list(client.run(os.getpid).values())

    def kill_one_worker_soon():
        time.sleep(1.2)
        os.kill(pids[0], signal.SIGKILL)

    killer = threading.Thread(target=kill_one_worker_soon)
    killer.start()
    summary, group, plan = run(tmp_path, client, alpha=[0.9, 1.1], extra_params="sleep = 0.4",
                               method_extra="n_seeds = 5")
    killer.join()
    assert (summary.done, summary.failed) == (2, 0)
    assert (group.group["attempts"][...] == 1).all()
    for point in plan.points:
        assert_same_as_serial(plan, group, point)
    client.wait_for_workers(2, timeout=60)


def test_killed_driver_resumes_only_the_missing_seeds(tmp_path):
    spec = write_spec(tmp_path, method="seeded", alpha=[0.6], extra_params="sleep = 0.3",
                      method_extra="n_seeds = 10")
    store = tmp_path / "driver.zarr"
    cmd = [sys.executable, "-m", "seqphase.cli", "run", str(spec), "--store", str(store), "--workers", "2",
           "--no-progress"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    kept_dir = store / FOLDER / "toy"
    deadline, kept = time.time() + 120, 0
    while time.time() < deadline and kept < 4:
        time.sleep(0.2)
        kept = sum(1 for _ in kept_dir.glob("*/*.npz"))
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = sum(1 for _ in kept_dir.glob("*/*.npz"))
    assert 4 <= kept < 11
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    group = Store(store).open_sweep("toy")
    assert (group.ledger()[0] == DONE).all()
    assert last_run(group)["works"] == 11 - kept  # only the works not kept by the killed run
    plan = plan_sweep(load_sweep(str(spec)))
    assert_same_as_serial(plan, group, plan.points[0])


def test_points_assembled_from_kept_work_files_equal_the_serial_run(tmp_path):
    """Every work of a GLM GAMP point and of a multi-index GAMP point written to its kept-work file and read
    back (results/parts.py: npz, no pickle) gives the point's outputs bit for bit (and the same dtypes)."""
    from seqphase.core.models import drive

    parts = Parts(tmp_path, "p")
    for name, overrides in (("glm-perceptron-gamp", ["method.d=40", "method.n_seeds=3", "method.max_iter=8",
                                                     "alpha=0.5,1"]),
                            ("multiindex-gamp", ["method.d=30", "method.n_seeds=2", "method.max_iter=6"])):
        plan = plan_sweep(load_sweep(name, overrides=overrides))
        point = plan.points[-1]
        params, settings = plan.point_inputs(point)
        stream = point_stream(plan.sweep.seed, point.seed_key)
        direct = drive(plan.model.tasks(plan.sweep.method, params, settings, stream))

        def through_a_file(work):
            assert parts.save(point.hash, work.key, work.fn(**work.kwargs), {"runtime_s": 0.0})
            return parts.load(point.hash)[work.key]

        stream = point_stream(plan.sweep.seed, point.seed_key)
        kept = drive(plan.model.tasks(plan.sweep.method, params, settings, stream), through_a_file)
        assert sorted(kept) == sorted(direct)
        for key in direct:
            a, b = np.asarray(direct[key]), np.asarray(kept[key])
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), (name, key)
        parts.drop(point.hash)
