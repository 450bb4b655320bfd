"""Spec parsing, validation and planning: every bad input names its field and the fix."""

import numpy as np
import pytest

from spec_files import write_spec
from seqphase.core.errors import SpecError
from seqphase.sweeps.planner import plan_sweep
from seqphase.sweeps.spec import load_sweep, parse_sweep, shipped_specs


def glm_spec(**changes):
    raw = {"name": "t", "model": "glm", "seed": 1,
           "params": {"prior": "gaussian", "channel": "sign", "alpha": [0.5, 1.0]},
           "method": {"name": "se"}}
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            raw[section][field] = value
        else:
            raw[section] = value
    return raw


@pytest.mark.parametrize("changes, field, words", [
    ({"colour": "red"}, "colour", "unknown top-level key"),
    ({"model": "nosuchmodel"}, "model", "unknown model"),
    ({"params__beta": 1.0}, "params.beta", "no parameter"),
    ({"params__alpha": [-1.0, 1.0]}, "params.alpha", "out of range"),
    ({"params__alpha": 0.0}, "params.alpha", "out of range"),
    ({"params__prior": "gauss-bernoulli", "params__rho": 1.5}, "params.rho", "out of range"),
    ({"params__prior": "gauss-bernoulli", "params__rho": 0.0}, "params.rho", "out of range"),
    ({"params__rho": 0.5}, "params.rho", "only used by prior"),
    ({"params__channel": "tanh"}, "params.channel", "not valid"),
    ({"method__name": "mcmc"}, "method.name", "no method"),
    ({"method__tolerance": 1e-3}, "method.tolerance", "no setting"),
    ({"method__max_iter": 2.5}, "method.max_iter", "integer"),
    ({"params__alpha": {"start": 0.1, "stop": 1.0}}, "params.alpha", "range needs"),
    ({"params__alpha": "0.1:x:3"}, "params.alpha", "cannot read range"),
    ({"name": "Bad Name"}, "name", "not a valid sweep name"),
    ({"seed": -3}, "seed", "non-negative"),
])
def test_bad_spec_names_field(changes, field, words):
    with pytest.raises(SpecError) as info:
        parse_sweep(glm_spec(**changes))
    assert info.value.field == field
    assert words in info.value.one_line()
    assert "\n" not in info.value.one_line()


def test_threshold_method_rejects_alpha():
    with pytest.raises(SpecError, match="not used by method 'threshold'"):
        parse_sweep(glm_spec(method={"name": "threshold"}))


def test_missing_required_alpha():
    raw = glm_spec()
    del raw["params"]["alpha"]
    with pytest.raises(SpecError) as info:
        parse_sweep(raw)
    assert info.value.field == "params.alpha"


def test_malformed_toml(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text("name = \"x\"\n[params\nalpha = 1\n")
    with pytest.raises(SpecError, match="malformed TOML"):
        load_sweep(str(path))


def test_unknown_sweep_name():
    with pytest.raises(SpecError, match="seqphase list"):
        load_sweep("no-such-sweep")


def test_ranges_and_overrides(tmp_path):
    path = write_spec(tmp_path, alpha="0.5:2:4")
    sweep = load_sweep(str(path))
    assert sweep.params["alpha"] == [0.5, 1.0, 1.5, 2.0]
    sweep = load_sweep(str(path), overrides=["alpha=1,3", "scale=2"])
    assert sweep.params["alpha"] == [1.0, 3.0] and sweep.settings["scale"] == 2.0
    sweep = load_sweep(str(path), overrides=["alpha=0.1:0.3:3"])
    assert np.allclose(sweep.params["alpha"], [0.1, 0.2, 0.3])
    with pytest.raises(SpecError) as info:
        load_sweep(str(path), overrides=["gamma=1"])
    assert info.value.field == "--set gamma"
    with pytest.raises(SpecError, match="out of range"):
        load_sweep(str(path), overrides=["alpha=-1"])
    with pytest.raises(SpecError, match="NAME=VALUES"):
        load_sweep(str(path), overrides=["alpha"])


def test_log_range():
    sweep = parse_sweep(glm_spec(params__alpha={"start": 0.1, "stop": 10.0, "num": 3, "scale": "log"}))
    assert np.allclose(sweep.params["alpha"], [0.1, 1.0, 10.0])


def test_point_hashes_are_stable_and_distinct(tmp_path):
    path = write_spec(tmp_path, alpha="0.5:2:4")
    a, b = plan_sweep(load_sweep(str(path))), plan_sweep(load_sweep(str(path)))
    assert [p.hash for p in a.points] == [p.hash for p in b.points]
    assert len({p.hash for p in a.points}) == 4
    # The same physical point from a different grid is the same point (same hash, same seeds).
    c = plan_sweep(load_sweep(str(path), overrides=["alpha=1.0"]))
    assert c.points[0].hash == a.points[1].hash and c.points[0].seed_key == a.points[1].seed_key
    # A changed setting is a different point, drawn from the same seeds.
    d = plan_sweep(load_sweep(str(path), overrides=["alpha=1.0", "scale=2"]))
    assert d.points[0].hash != c.points[0].hash and d.points[0].seed_key == c.points[0].seed_key
    # A changed spec seed changes the hash too.
    e = plan_sweep(load_sweep(str(write_spec(tmp_path, name="toy2", alpha=1.0, seed=8))))
    assert e.points[0].hash != c.points[0].hash


def test_every_shipped_spec_plans():
    names = shipped_specs()
    for required in ("glm-perceptron-se", "glm-perceptron-gamp", "glm-binary-perceptron-thresholds",
                     "glm-phase-retrieval-thresholds", "glm-cs-thresholds"):
        assert required in names
    for name in names:
        plan = plan_sweep(load_sweep(name))
        assert plan.points and plan.sweep.name == name
