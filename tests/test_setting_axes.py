"""Method settings given several values are grid axes: their own dim, points and seeds, validated before
anything runs; a setting that cannot be an axis is refused naming it."""

import numpy as np
import pytest

from spec_files import write_spec
from test_seed_tasks import plan_of, run, serial, stored
from seqphase.cli import main
from seqphase.core.errors import SpecError
from seqphase.results.store import DONE, Store
from seqphase.sweeps.planner import plan_sweep, sweep_identity
from seqphase.sweeps.spec import load_sweep


def test_a_numeric_setting_with_several_values_is_a_grid_axis():
    sweep = load_sweep("glm-perceptron-gamp", overrides=["d=50,100,200", "alpha=1,2", "n_seeds=2"])
    plan = plan_sweep(sweep)
    assert sweep.setting_axes == {"d": [50, 100, 200]} and plan.dims[-1] == "d"
    assert len(plan.points) == 6
    assert len({p.hash for p in plan.points}) == 6 and len({p.seed_key for p in plan.points}) == 6
    params, settings = plan.point_inputs(plan.points[-1])
    assert "d" not in params and settings["d"] == 200 and settings["n_seeds"] == 2
    assert plan.identity["setting_axes"] == ["d"] and "d" not in plan.identity["settings"]
    # a range works the same way, on the command line and in a spec
    ranged = load_sweep("glm-perceptron-gamp", overrides=["damping=0:0.4:3"])
    assert ranged.setting_axes == {"damping": [0.0, 0.2, 0.4]}


def test_sweeps_without_setting_axes_keep_their_identity():
    sweep = load_sweep("glm-perceptron-gamp")
    assert sweep.setting_axes == {}
    assert sweep_identity(sweep) == {"model": "glm", "method": "gamp", "settings": sweep.settings, "seed": sweep.seed}


@pytest.mark.parametrize("override, field, says", [
    ("n_seeds=2,3", "method.n_seeds", "change what a point stores"),
    ("max_iter=10,20", "method.max_iter", "change what a point stores"),
    ("d=0,100", "method.d", "out of range"),
    ("d=100,100", "method.d", "repeated"),
])
def test_settings_that_cannot_be_axes_are_refused(override, field, says):
    with pytest.raises(SpecError) as err:
        load_sweep("glm-perceptron-gamp", overrides=[override])
    assert err.value.field == field and says in err.value.one_line()


def test_a_list_of_a_non_numeric_setting_is_refused_in_one_line(tmp_path, capsys):
    store = tmp_path / "s.zarr"
    assert main(["run", "aim-gamp", "--set", "cavity=auto,gram", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("seqphase: error: method.cavity") and "numeric setting" in err[0]
    assert not store.exists()


def test_setting_axis_runs_grows_and_retries_like_a_parameter(tmp_path, client, marker_dir):
    spec = dict(alpha=[0.41], extra_params='fail = "once"', method_extra='tail = "0:0.1:2"')
    summary, group, plan = run(tmp_path, client, retries=0, **spec)
    assert plan.dims[-1] == "tail" and (summary.done, summary.failed) == (0, 2)  # seed 1 fails once per point
    retried, group, plan = run(tmp_path, client, mode="retry-failed", retries=0, **spec)
    assert (retried.done, retried.failed) == (2, 0)
    noise = [stored(group, p, "noise") for p in plan.points]
    assert not np.array_equal(noise[0], noise[1])  # each value of the axis draws its own instances
    for point, values in zip(plan.points, noise):
        assert np.array_equal(values, serial(plan, point)["noise"])
    spec["method_extra"] = "tail = [0.0, 0.1, 0.2]"
    grown, group, plan = run(tmp_path, client, **spec)
    assert (grown.submitted, grown.already_done) == (1, 2)  # the grid grew along `tail`
    assert (group.ledger()[0] == DONE).all()
    assert list(Store(group.store.path).open_sweep("toy").coords["tail"]) == [0.0, 0.1, 0.2]
