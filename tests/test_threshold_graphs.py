"""Threshold points as graphs of tasks (core/search.py; glm and quadratic-erm threshold version 2, the
bisections of quadratic and bsr) on a real distributed LocalCluster: the distributed point equals the
serial `run` bit for bit, a worker killed mid-probe loses nothing, and a failing probe is retried alone,
then recorded as failed with its reason while the point's other works are kept."""

import os
import signal
import threading
import time

import numpy as np
import pytest

from spec_files import write_spec
from seqphase.cluster import run_sweep
from seqphase.core.models import check_outputs, get_model, point_stream
from seqphase.results.parts import Parts
from seqphase.results.store import DONE, FAILED, Store
from seqphase.sweeps.planner import plan_sweep
from seqphase.sweeps.spec import load_sweep


def serial(plan, point):
    model = get_model(plan.sweep.model)
    params, settings = plan.point_inputs(point)
    out = model.run(plan.sweep.method, params, settings, point_stream(plan.sweep.seed, point.seed_key))
    return check_outputs(model, plan.sweep.method, settings, out)


def assert_stored_as_serial(plan, group):
    for point in plan.points:
        index = group.index_of(point)
        for name, value in serial(plan, point).items():
            assert np.array_equal(group.read(name)[index], value, equal_nan=True), name


def last_run(group):
    return Store(group.store.path).open_sweep(group.name).attrs["runs"][-1]


def run(tmp_path, client, name, overrides, retries=2):
    plan = plan_sweep(load_sweep(name, overrides))
    group = Store(tmp_path / "s.zarr").prepare(plan)
    return run_sweep(plan, group, client, retries=retries, progress=False), group, plan


def test_glm_threshold_point_distributed_equals_serial_bit_for_bit(tmp_path, client):
    """The binary perceptron (stability, bisection and IT routes side by side, rtol 1e-2, IT rtol 1e-3):
    every stored value equals the serial run; the run record shows the graph (many works, chain below the
    work)."""
    summary, group, plan = run(tmp_path, client, "glm-binary-perceptron-thresholds", ["rtol=0.01", "it_rtol=1e-3"])
    assert (summary.done, summary.failed) == (1, 0)
    assert_stored_as_serial(plan, group)
    record = last_run(group)
    assert record["works"] > 20 and record["chain_s"] < 0.7 * record["work_s"]
    stored = {name: group.read(name)[group.index_of(plan.points[0])] for name in ("alpha_bisection", "alpha_it")}
    assert abs(stored["alpha_bisection"] - 1.4926) < 0.01 * 1.5 and abs(stored["alpha_it"] - 1.2447) < 1.3e-3


def test_bisection_threshold_point_distributed_is_the_serial_bisection_bit_for_bit(tmp_path, client):
    """The bisection placement (aim, quadratic, bsr: one route, core/search.py, whose value is the serial
    bisection's for any k, tests/core/test_search.py): the probes of a round run as works on the cluster, and
    the stored value equals the serial run's and that of the serial bisection (k = 1, one probe a round)."""
    summary, group, plan = run(tmp_path, client, "bsr-thresholds", ["rho=0.5", "beta=1.0", "rtol=1e-6", "k=3"])
    assert (summary.done, summary.failed) == (1, 0)
    assert_stored_as_serial(plan, group)
    assert last_run(group)["works"] > 20
    point = plan.points[0]
    params, settings = plan.point_inputs(point)
    one_probe_a_round = get_model(plan.sweep.model).run("threshold", params, dict(settings, k=1), None)
    assert group.read("alpha_bisection")[group.index_of(point)] == one_probe_a_round["alpha_bisection"]


def test_killed_worker_mid_probe_loses_nothing(tmp_path, client):
    """Compressed sensing at rho = 0.5 (rtol 1e-2): the worker running a probe of the bisection is
    killed; the scheduler reruns its works elsewhere and the point is stored whole, equal to serial."""
    pids = client.run(os.getpid)
    killed = []

    def kill_a_worker_running_a_probe():
        deadline = time.time() + 60
        while time.time() < deadline and not killed:
            for address, keys in client.processing().items():
                if any("-bisection-" in str(key) or "-batch-" in str(key) for key in keys):
                    os.kill(pids[address], signal.SIGKILL)
                    killed.append(address)
                    return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_a_worker_running_a_probe)
    killer.start()
    summary, group, plan = run(tmp_path, client, "glm-cs-thresholds", ["rho=0.5", "rtol=0.01"])
    killer.join()
    assert killed, "no probe was seen running"
    assert (summary.done, summary.failed) == (1, 0)
    assert (group.group["attempts"][...] == 1).all()
    assert_stored_as_serial(plan, group)
    client.wait_for_workers(2, timeout=60)


def toy(tmp_path, client, fail, retries):
    path = write_spec(tmp_path, name="toysearch", alpha=[1.2345], method="search",
                      extra_params=f'fail = "{fail}"\nsleep = 0.05')
    plan = plan_sweep(load_sweep(str(path)))
    group = Store(tmp_path / "t.zarr").prepare(plan)
    return run_sweep(plan, group, client, retries=retries, progress=False), group, plan


def test_failing_probe_is_retried_alone_and_the_point_stored(tmp_path, client, marker_dir):
    summary, group, plan = toy(tmp_path, client, "once", retries=1)
    assert (summary.done, summary.failed) == (1, 0)
    assert_stored_as_serial(plan, group)
    root, lo, hi = (group.read(name)[0] for name in ("root", "lo", "hi"))
    assert lo < 1.2345 <= hi and hi - lo <= 1e-3 * hi


def test_probe_that_always_fails_is_recorded_with_its_reason_and_the_rest_is_kept(tmp_path, client):
    summary, group, plan = toy(tmp_path, client, "always", retries=1)
    assert (summary.done, summary.failed) == (0, 1)
    assert (group.ledger()[0] == FAILED).all()
    error = str(group.read("error").ravel()[0])
    assert error.startswith("search-1-1: RuntimeError: injected failure of probe search-1-1"), error
    kept = sorted(Parts(group.store.path, "toysearch").load(plan.points[0].hash))
    # round one (k + 2 = 5 probes), the closed-form work beside the search, the other probes of round 2
    assert kept == ["closed", "search-0-0", "search-0-1", "search-0-2", "search-0-3", "search-0-4",
                    "search-1-0", "search-1-2"]
    assert DONE not in group.ledger()[0]


def test_multiindex_threshold_points_distributed_equal_serial_bit_for_bit(tmp_path, client):
    """z1 z2 and sign(z1 z2) (the stability work, then the easy bisection as k-sections guessed at the
    stability value): stored values equal the serial run; the bisections land within rtol of the
    stability values (0.593751 and pi^2/4, spec targets)."""
    summary, group, plan = run(tmp_path, client, "multiindex-thresholds", ["channel=z1z2,sign-z1z2"])
    assert (summary.done, summary.failed) == (2, 0)
    assert_stored_as_serial(plan, group)
    for point, target in zip(plan.points, (0.593751, np.pi**2 / 4)):
        bisection = group.read("alpha_bisection")[group.index_of(point)][0]
        assert abs(bisection - target) <= 2e-3 * target


@pytest.mark.slow
def test_erm_threshold_point_distributed_equals_serial_bit_for_bit(tmp_path, client):
    """quadratic-erm kappa_star = 1 (the two equations, two bracket works and the two searches' probes):
    stored values equal the serial run (~1 CPU-min)."""
    summary, group, plan = run(tmp_path, client, "quadratic-erm-thresholds", ["kappa_star=1.0", "rtol=1e-4"])
    assert (summary.done, summary.failed) == (1, 0)
    assert_stored_as_serial(plan, group)


@pytest.mark.parametrize("model", ["glm", "multiindex", "quadratic-erm"])
def test_bad_k_and_bracket_are_refused_before_anything_runs(model):
    from seqphase.core.errors import ParameterError

    with pytest.raises(ParameterError, match="method.k"):
        get_model(model).check_settings("threshold", {"k": 1})
    if model != "quadratic-erm":
        settings = get_model(model).check_settings("threshold", {"alpha_lo": 2.0, "alpha_hi": 1.0})
        with pytest.raises(ParameterError, match="method.alpha_lo"):
            get_model(model).method("threshold").check({}, settings)
