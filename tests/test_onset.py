"""The finite-size onset rule (core/onset.py) on curves with a known onset, its refusals, and the method
end to end on the GLM (phase retrieval, weak recovery at alpha = 1/2) at small sizes."""

import json
import math

import numpy as np
import pytest

from seqphase.core import onset
from seqphase.core.errors import ParameterError
from seqphase.core.models import get_model


def synthetic(alphas, d, n, rng, alpha_c=0.5, a=0.45, b=1.0, noise=1.0):
    """Overlaps of n seeds: the rise a x + b x^2 (x = alpha - alpha_c > 0, 0 below) plus seed noise of
    standard deviation noise / sqrt(d), folded to |.| as a sign-blind overlap is."""
    x = np.clip(np.asarray(alphas) - alpha_c, 0.0, None)
    clean = a * x + b * x ** 2
    return np.abs(clean[:, None] + noise / math.sqrt(d) * rng.standard_normal((len(alphas), n)))


def test_the_crossing_of_a_straight_rise_is_exact():
    alphas = np.linspace(0.3, 1.0, 8)
    means = np.clip(alphas - 0.5, 0, None)
    assert onset.crossing(alphas, means, 400, 2.0) == pytest.approx(0.5 + 0.1)   # level 2 / 20 = 0.1
    # the LAST upward crossing: a seed-noise bump below the onset does not count
    bumped = means.copy()
    bumped[1] = 0.2
    assert onset.crossing(alphas, bumped, 400, 2.0) == pytest.approx(0.6)


def test_bootstrap_errors_cover_the_crossing_of_the_mean_curve():
    """Seeds drawn around a known mean curve: the crossing of the 16-seed mean lands within 3 bootstrap s.e.
    of the crossing of the exact mean curve (the folded normal's mean, from 10^6 draws), at every size and
    in 8 repetitions; and the s.e. is the scatter of the estimates (ratio within 0.5-2)."""
    rng = np.random.default_rng(7)
    alphas = np.linspace(0.4, 1.0, 13)
    for d in (250, 1000):
        exact = onset.crossing(alphas, synthetic(alphas, d, 10 ** 6 // 13, rng).mean(axis=1), d, 2.0)
        values, ses = [], []
        for _ in range(8):
            value, se = onset.onset_at_size(alphas, synthetic(alphas, d, 16, rng), d, level=2.0, rng=rng, n_boot=200)
            assert abs(value - exact) < 3 * se, (d, value, exact, se)
            values.append(value), ses.append(se)
        assert 0.5 < np.std(values, ddof=1) / np.mean(ses) < 2.0


def test_a_diverged_instance_is_left_out_of_the_mean():
    """A GAMP run that diverged (final overlap 1e3, or NaN) says nothing of the onset: the rule's estimate
    is the crossing of the means over the other seeds of each alpha, and its bootstrap stays finite.
    Version 1 took the plain mean, which such runs moved by a window step (multi-index z1 z2 at d = 250,
    docs/validation/onset.md)."""
    rng = np.random.default_rng(11)
    alphas, d = np.linspace(0.4, 1.0, 13), 250
    clean = synthetic(alphas, d, 16, rng)
    broken = clean.copy()
    broken[2, 5], broken[9, 0] = 1e3, np.nan  # below the onset and above it
    value, se = onset.onset_at_size(alphas, broken, d, level=2.0, rng=np.random.default_rng(0), n_boot=200)
    kept = [np.delete(row, [5] if j == 2 else [0] if j == 9 else []) for j, row in enumerate(broken)]
    assert value == pytest.approx(onset.crossing(alphas, [row.mean() for row in kept], d, 2.0), rel=1e-12)
    assert np.isfinite(se) and 0 < se < 0.1
    assert list(onset.diverged(np.array([0.5, 1.9, 2.5, np.inf, np.nan]))) == [False, False, True, True, True]


def test_an_alpha_where_most_runs_diverged_fails_the_point_with_its_reason():
    rng = np.random.default_rng(12)
    alphas, d = np.linspace(0.4, 1.0, 13), 250
    overlaps = synthetic(alphas, d, 16, rng)
    overlaps[6, :9] = np.inf  # 9 of 16
    with pytest.raises(onset.OnsetWindowError, match="alpha = 0.7 GAMP diverged on 9 of 16"):
        onset.onset_at_size(alphas, overlaps, d, level=2.0, rng=rng, n_boot=50)


def test_a_shift_like_the_correction_is_removed_by_the_extrapolation():
    sizes = [250, 500, 1000, 2000]
    rng = np.random.default_rng(3)
    onsets = [0.5 + 1.2 * d ** (-1 / 3) + 0.004 * rng.standard_normal() for d in sizes]
    inf, se, chi2 = onset.extrapolate(sizes, onsets, [0.004] * 4, "d^-1/3")
    assert abs(inf - 0.5) < 3 * se and se < 0.03
    # the wrong exponent is biased (by 17 s.e. here): the choice of correction matters (docs/validation/onset.md)
    biased, biased_se, _ = onset.extrapolate(sizes, onsets, [0.004] * 4, "d^-1")
    assert biased - 0.5 > 0.05 and biased - 0.5 > 5 * biased_se


def test_extrapolation_through_two_sizes_is_the_line_through_them():
    inf, se, chi2 = onset.extrapolate([500, 1000], [0.6, 0.55], [0.01, 0.01], "d^-1")
    assert inf == pytest.approx(0.5) and chi2 == pytest.approx(0.0, abs=1e-20)
    assert se == pytest.approx(math.sqrt(0.01 ** 2 * 4 + 0.01 ** 2), rel=1e-9)  # 2 y1 - y0 at x = 0


@pytest.mark.parametrize("means, message", [
    ([0.2, 0.3, 0.4, 0.5, 0.6], "lowest alpha"),    # already above the level at lo: lower lo
    ([0.0, 0.0, 0.0, 0.01, 0.03], "highest alpha"),  # not out of the floor at hi: raise hi
])
def test_a_window_that_misses_the_onset_is_refused_with_its_reason(means, message):
    with pytest.raises(onset.OnsetWindowError, match=message):
        onset.crossing(np.linspace(0.3, 0.7, 5), np.array(means), 1000, 2.0)


def test_bad_settings_are_refused_before_anything_runs():
    model = get_model("glm")
    method = model.method("onset")
    params = {"prior": "gaussian", "channel": "abs", "rho": 1.0, "delta": 0.0}
    with pytest.raises(ParameterError, match="at least two sizes"):
        method.check(params, model.check_settings("onset", {"sizes": [500]}))
    with pytest.raises(ParameterError, match="alpha_lo"):
        method.check(params, model.check_settings("onset", {"alpha_lo": 1.0, "alpha_hi": 0.5}))
    with pytest.raises(ParameterError, match="sizes"):
        model.check_settings("onset", {"sizes": [250, 5]})
    with pytest.raises(ParameterError, match="repeated"):
        model.check_settings("onset", {"sizes": [250, 250]})


def test_glm_onset_runs_as_works_and_equals_the_serial_run(tmp_path, client):
    """Phase retrieval at d = 100, 200 (4 seeds, 6 alphas): the point runs as 48 works on the real local
    cluster, stores per-size onsets and the extrapolation with their dims, and equals `Method.run` bit for bit.
    (Sizes this small only exercise the machinery; the rule's validation is docs/validation/onset.md.)"""
    from seqphase.cluster.driver import run_sweep
    from seqphase.core.models import check_outputs, point_stream
    from seqphase.results.store import DONE, Store
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    spec = tmp_path / "pr-onset.toml"
    spec.write_text('name = "pr-onset"\nmodel = "glm"\nseed = 3\n[params]\nprior = "gaussian"\nchannel = "abs"\n'
                    '[method]\nname = "onset"\nsizes = [100, 200]\nn_seeds = 4\nalpha_lo = 0.2\nalpha_hi = 2.2\n'
                    'alpha_n = 6\nmax_iter = 100\n')
    plan = plan_sweep(load_sweep(str(spec)))
    group = Store(tmp_path / "s.zarr").prepare(plan)
    summary = run_sweep(plan, group, client, progress=False)
    assert (summary.done, summary.failed) == (1, 0)
    assert (group.ledger()[0] == DONE).all()
    point = plan.points[0]
    model = get_model("glm")
    params, settings = plan.point_inputs(point)
    expected = check_outputs(model, "onset", settings,
                             model.run("onset", params, settings, point_stream(plan.sweep.seed, point.seed_key)))
    from seqphase.results.query import open_results

    ds = open_results("pr-onset", tmp_path / "s.zarr")
    assert ds["alpha_overlap"].dims[-3:] == ("size", "alpha_step", "seed")
    for name in ("alpha_gamp", "alpha_gamp_se", "alpha_gamp_d", "alpha_overlap", "alpha_n_iter"):
        assert np.array_equal(group.read(name)[group.index_of(point)], expected[name]), name
    assert np.all(np.isfinite(expected["alpha_gamp_d"])) and expected["alpha_gamp_se"] > 0
    # `seqphase query`: one row a point, the per-size onsets as columns (the instances stay in the Dataset)
    import io

    from seqphase.results.query import to_frame, write_table

    frame = to_frame(ds)
    assert len(frame) == 1 and "seed" not in frame.columns and "alpha_overlap" not in frame.columns
    assert [frame[f"alpha_gamp_d_{d}"][0] for d in (100, 200)] == list(expected["alpha_gamp_d"])
    assert frame["alpha_gamp_d_se_200"][0] == expected["alpha_gamp_d_se"][1]
    out = io.StringIO()
    write_table("pr-onset", tmp_path / "s.zarr", out)
    assert out.getvalue() == frame.to_csv(index=False)


def test_sizes_is_a_list_on_the_command_line_and_one_size_is_refused(tmp_path, capsys):
    from seqphase.cli import main
    from seqphase.sweeps.spec import load_sweep

    sweep = load_sweep("smi-thresholds-gamp", overrides=["sizes=200,400", "skip=1.0"])
    assert sweep.settings["sizes"] == [200, 400] and not sweep.setting_axes  # a list, never a grid axis
    store = tmp_path / "s.zarr"
    assert main(["run", "smi-thresholds-gamp", "--set", "sizes=500", "--store", str(store)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "method.sizes" in err[0] and "at least two sizes" in err[0]
    assert main(["run", "smi-thresholds-gamp", "--set", "alpha1_lo=1.2", "--store", str(store)]) == 2
    assert "alpha1_lo" in capsys.readouterr().err
    assert not store.exists()


def test_the_phase_diagram_draws_the_onset_companion():
    """smi-thresholds' figure draws alpha_2 / alpha_1 of an onset sweep (here two made-up skips) as points
    with error bars beside the SE routes, and the thresholds of a companion run at another eps (the
    noiseless model), each labelled with its eps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import xarray as xr

    from seqphase.core.figures import REFERENCE
    from seqphase.core.smi import figures
    from seqphase.results.store import DONE
    from seqphase.sweeps.families import reference

    skips = np.array([0.1, 1.0])
    columns = dict(alpha2_stability=[0.24, 0.19], alpha2_stability_se=[0.003, 0.002], alpha1_stability=[0.73, 0.74],
                   alpha1_stability_se=[0.003, 0.003], alpha2_bisection=[0.24, 0.19], alpha1_bisection=[0.73, 0.74],
                   status=[DONE, DONE])
    thresholds = xr.Dataset({k: ("skip", v) for k, v in columns.items()}, coords={"skip": skips},
                            attrs={"point_dims": ["skip"]})
    onset_values = dict(alpha2_gamp=[0.25, 0.2], alpha2_gamp_se=[0.03, 0.03], alpha1_gamp=[0.76, np.nan],
                        alpha1_gamp_se=[0.04, np.nan])
    # as stored: a (skip, depth) grid with one depth
    # (its skips need not be the SE sweep's: 6.0 lies beyond them and the published curve, and widens the axis)
    companion = xr.Dataset({k: (("skip", "depth"), np.reshape(v, (2, 1))) for k, v in onset_values.items()},
                           coords={"skip": [0.1, 6.0], "depth": [2]})
    # the same thresholds of the noiseless model (eps = 1e-5 in its settings) beside the reference code's
    noiseless = thresholds.assign(alpha1_stability=("skip", [0.71, 0.72])).expand_dims(depth=[2], axis=1)
    noiseless.attrs["settings"] = '{"eps": 1e-05}'
    thresholds.attrs["settings"] = '{"eps": 0.001}'
    fig = figures.plot_thresholds(plt, thresholds, {"onset_sweep": companion, "noiseless_sweep": noiseless,
                                                    REFERENCE: reference("smi")})
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert any("alpha_2$ GAMP" in label for label in labels) and any("alpha_1$ GAMP" in label for label in labels)
    assert any("alpha_1$ stability, eps = 1e-05" in label for label in labels)
    assert any("alpha_1$ stability $\\pm$ s.e., eps = 0.001" in label for label in labels)
    assert fig.axes[0].get_xlim()[1] > 6.0  # the onset point at c = 6 inside the axes
    plt.close(fig)


def _smi_onset_script(monkeypatch, out):
    """benchmarks/smi_onset.py as a module, writing its logs under `out`."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "smi_onset.py"
    monkeypatch.syspath_prepend(str(path.parent))  # its `import harness`, as `python benchmarks/smi_onset.py` has
    spec = importlib.util.spec_from_file_location("smi_onset_script", path)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, script)  # its process pool pickles _work by module name
    spec.loader.exec_module(script)
    monkeypatch.setattr(script, "OUT", out)
    return script


def test_benchmark_instances_are_handed_to_the_sweep_as_the_points_own_works(tmp_path, monkeypatch, capsys):
    """`smi_onset.py parts`: the instances logged by `run` become finished works of the smi-thresholds-gamp point
    under its hash, each equal to what the point's own work returns; a log that the work does not reproduce
    is refused and nothing is written."""
    import pickle

    from seqphase.results.parts import Parts
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    script = _smi_onset_script(monkeypatch, tmp_path / "logs")
    tiny = ["sizes=20,30", "n_seeds=2", "alpha1_n=2", "max_iter=4"]
    assert script.parts(1.0, str(tmp_path / "none.zarr"), tiny) == 1  # no log yet: nothing to hand
    assert "no log" in capsys.readouterr().err and not (tmp_path / "none.zarr").exists()
    script.run(1.0, "alpha1", [20, 30], 1, tiny)
    store = tmp_path / "s.zarr"
    assert script.parts(1.0, str(store), tiny) == 0
    (point,) = plan_sweep(load_sweep("smi-thresholds-gamp", ["skip=1"] + script.GRID + tiny)).points
    method, params, settings, stream, _ = script.point(1.0, tiny)
    works = {w.key: w for w in next(method.tasks(params, settings, stream))}
    kept = Parts(store, "smi-thresholds-gamp").load(point.hash)
    assert sorted(kept) == sorted(k for k in works if k.startswith("alpha1-"))  # 2 sizes x 2 alphas x 2 seeds
    for key, result in kept.items():
        assert pickle.dumps(result) == pickle.dumps(works[key].fn(**works[key].kwargs)), key
    # `table --store` reads the point's finished works while the point is not stored, each with its kept time
    log_lines = script.log_path(1.0, "alpha1").read_text().splitlines()
    logged = {row["key"]: row["cpu_s"] for row in map(json.loads, log_lines)}
    assert script.stored_rows(1.0, str(store), tiny) == ({k: {**v, "work_s": logged[k]} for k, v in kept.items()}, None)
    capsys.readouterr()
    assert script.table(1.0, "alpha1", tiny, store=str(store)) == 0
    sizes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("d = ")]
    keys = [[k for k in kept if k.startswith(f"alpha1-d{d}-")] for d in (20, 30)]
    assert [float(line.split("(")[1].split(" s of work")[0]) for line in sizes] == [
        round(sum(logged[k] for k in ks)) for ks in keys]
    assert script.table(1.0, "alpha1", tiny, store=str(store), markdown=True) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| alpha_1, \\|M11\\| at d | ") and lines[1] == "|---|---|---|---|"
    assert lines[2].startswith("| 20 | ") and lines[3].startswith("| 30 | ")  # each size: 2 alphas, 2 seeds
    # bad input: a missing store, or a store without this point's instances (other settings): one line, exit 2
    assert script.table(1.0, "alpha1", tiny, store=str(tmp_path / "none.zarr")) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "no seqphase store" in err and not (tmp_path / "none.zarr").exists()
    assert script.table(1.0, "alpha1", tiny[:-1] + ["max_iter=5"], store=str(store)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "holds no instance" in err and "--set skip=1" in err

    # `log`, the inverse of `parts`: the store's kept works written back as the log `run` wrote (same rows,
    # the kept time as cpu_s), and handed by `parts` to another store as the same works
    log = script.log_path(1.0, "alpha1")
    ran = {row["key"]: row for row in map(json.loads, log_lines)}
    log.unlink()
    assert script.log(1.0, str(store), tiny) == 0
    assert {row["key"]: row for row in map(json.loads, log.read_text().splitlines())} == ran
    assert not script.log_path(1.0, "alpha2").exists()  # no alpha_2 work kept: no log
    assert script.log(1.0, str(store), tiny) == 0 and len(log.read_text().splitlines()) == len(ran)  # nothing twice
    moved = tmp_path / "moved.zarr"
    assert script.parts(1.0, str(moved), tiny) == 0
    assert Parts(moved, "smi-thresholds-gamp").load_kept(point.hash) == {
        k: v._replace(meta={"runtime_s": ran[k]["cpu_s"], "host": "smi_onset.py"})
        for k, v in Parts(store, "smi-thresholds-gamp").load_kept(point.hash).items()}
    # a key logged with another value than the store keeps: refused, the log left as it was
    text = log.read_text()
    first = json.loads(text.splitlines()[0])
    log.write_text(json.dumps({**first, "overlap_1": first["overlap_1"] + 0.5}) + "\n" + text.split("\n", 1)[1])
    tampered = log.read_text()
    capsys.readouterr()
    assert script.log(1.0, str(store), tiny) == 1 and log.read_text() == tampered
    assert f"{first['key']} is logged with other values" in capsys.readouterr().err
    log.write_text(text)
    assert script.log(1.0, str(store), tiny[:-1] + ["max_iter=5"]) == 1  # another point: nothing kept for it
    assert "keeps no finished work" in capsys.readouterr().err
    assert script.log(1.0, str(tmp_path / "none.zarr"), tiny) == 2 and not (tmp_path / "none.zarr").exists()

    # the verified instance (smallest size, first alpha and seed) logged with another overlap
    log = script.log_path(1.0, "alpha1")
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    for row in rows:
        if row["key"] == onset.instance_key("alpha1", 20, 0, 0):
            row["overlap_1"] += 0.5
    log.write_text("".join(json.dumps(row) + "\n" for row in rows))
    other = tmp_path / "other.zarr"
    assert script.parts(1.0, str(other), tiny) == 1
    assert "not reproduced" in capsys.readouterr().err and not other.exists()


def test_design_reads_a_cheaper_design_off_a_point(tmp_path, monkeypatch, capsys):
    """`smi_onset.py design`: the first N sizes and M seeds of a point are the very draws of the point run with
    `--set sizes=<those> --set n_seeds=M` (same streams), and the design's cost share is its part of the
    sample-iterations (here closed form: constant n_iter, so (M / n_seeds) x (sizes kept / all sizes)); bad
    input is one line and exit 2."""
    from seqphase.results.parts import Parts
    from seqphase.results.store import Store

    script = _smi_onset_script(monkeypatch, tmp_path / "logs")
    full = ["sizes=20,30,40", "n_seeds=4", "max_iter=3"]
    method, params, settings, stream, point_hash = script.point(1.0, full)
    small = script.point(1.0, ["sizes=20,30", "n_seeds=2", "max_iter=3"])
    full_works = {w.key: w for w in next(method.tasks(params, settings, stream))}
    small_works = {w.key: w for w in next(small[0].tasks(small[1], small[2], small[3]))}
    assert small_works and set(small_works) < set(full_works)
    for key, work in small_works.items():
        a, b = work.kwargs["stream"], full_works[key].kwargs["stream"]
        assert (a.entropy, a.spawn_key) == (b.entropy, b.spawn_key), key

    store = tmp_path / "s.zarr"
    assert script.design(1.0, str(store), 2, 2, full) == 2  # no store yet
    assert "no seqphase store" in capsys.readouterr().err
    Store(store).check(create=True)
    kept = Parts(store, script.SWEEP)
    # made-up overlaps that leave the floor inside each window at every size (3 (alpha - a0), spread by seed)
    for t, alphas in method.windows(settings).items():
        a0 = 0.3 if t == "alpha2" else 0.7
        for d in settings["sizes"]:
            for j, alpha in enumerate(alphas):
                for s in range(settings["n_seeds"]):
                    value = max(0.0, 3.0 * (alpha - a0)) + 0.02 * (s - 1.5)
                    kept.save(point_hash, onset.instance_key(t, d, j, s),
                              {"overlap_1": value, "overlap_2": value, "n_iter": 3, "converged": 0},
                              {"runtime_s": 1.0})
    assert script.design(1.0, str(store), 2, 2, full) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("first 2 sizes, 2 seeds (d^-1/3 / d^-1/2 / d^-1): alpha2 ")
    assert out[1].startswith("whole point (d^-1/3 / d^-1/2 / d^-1): alpha2 ")
    share = (2 / 4) * (20 + 30) / (20 + 30 + 40)
    # the kept works' times (1 s each): the design's 2 seeds x 2 sizes x 16 alphas of the point's 4 x 3 x 16
    assert out[2] == f"cost: {share:.3f} of the point's sample-iterations; 64 of 192 s of work of the kept works"
    assert script.design(1.0, str(store), 4, 2, full) == 2  # more sizes than the sweep has
    assert "--sizes 4" in capsys.readouterr().err
    # a point still running: the design complete, the whole point not (its largest size): the design alone
    folder = store / ".seqphase-parts" / script.SWEEP / point_hash
    (folder / "alpha1-d40-a0-s3.npz").unlink()
    assert script.design(1.0, str(store), 2, 2, full) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "whole point: not complete yet (1 instances to go)"
    assert out[2] == "cost: 64 s of work of the kept works"
    (folder / "alpha1-d30-a0-s1.npz").unlink()
    assert script.design(1.0, str(store), 2, 2, full) == 2  # an instance of the design not there yet
    assert "not in" in capsys.readouterr().err


def _cap_point(tmp_path, monkeypatch, skip):
    """A tiny `smi-thresholds-gamp` point at `skip` (sizes 20, 30; 2 seeds; 3 iterations) whose alpha_1 window at
    d = 30 is run for real and kept in a fresh store, as a running sweep keeps its works: (script, method, store,
    the --set overrides)."""
    from seqphase.results.parts import Parts
    from seqphase.results.store import Store

    script = _smi_onset_script(monkeypatch, tmp_path / "logs")
    full = ["sizes=20,30", "n_seeds=2", "max_iter=3"]
    method, params, settings, stream, point_hash = script.point(skip, full)
    store = tmp_path / "s.zarr"
    Store(store).check(create=True)
    kept = Parts(store, script.SWEEP)
    for work in next(method.tasks(params, settings, stream)):
        if work.key.startswith("alpha1-d30-"):
            kept.save(point_hash, work.key, work.fn(**work.kwargs), {"runtime_s": 1.0})
    return script, method, store, full


def test_cap_reruns_stored_instances_through_their_stored_runs(tmp_path, monkeypatch, capsys):
    """`smi_onset.py cap`: a rerun to a larger cap is the stored instance continued (same stream, so its |M11|
    at the stored iteration is the stored value to the log's 6 decimals), logged per iteration and resumable;
    bad input is one line and exit 2."""
    script, method, store, full = _cap_point(tmp_path, monkeypatch, 1.0)
    args = (1.0, "alpha1", 30, [2, 3])
    for bad, n_seeds, flag in (((1.0, "alpha1", 40, [2]), None, "--size 40"),
                               ((1.0, "alpha1", 30, [7]), None, "--steps"),
                               ((1.0, "alpha1", 30, [2], 3), None, "--max-iter 3"),
                               ((1.0, "alpha1", 30, [2]), 3, "--seeds 3"), ((1.0, "alpha1", 30, [2]), 0, "--seeds 0")):
        call = bad + (6,) if len(bad) == 4 else bad
        assert script.cap(*call, str(store), n_seeds, 1, full) == 2
        assert flag in capsys.readouterr().err
    assert script.cap(1.0, "alpha2", 30, [0], 6, str(store), None, 1, full) == 2  # not run: nothing to rerun
    assert "not in" in capsys.readouterr().err

    assert script.cap(*args, 6, str(store), None, 1, full) == 0
    out = capsys.readouterr().out.splitlines()
    assert float(out[0].rsplit(" ", 1)[1]) <= 5e-7, out[0]
    assert out[1].startswith("alpha 0.700: mean ") and out[2].startswith("alpha 0.800: mean ")
    assert out[3].startswith("onset at d = 30, cap 3") and out[4].startswith("onset at d = 30, cap 6 at these alphas")
    log = tmp_path / "logs" / f"smi-c1-alpha1-d30-cap6-v{method.version}.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(r["key"] for r in rows) == [f"alpha1-d30-a{j}-s{s}" for j in (2, 3) for s in (0, 1)]
    assert all(len(r["trajectory"]) == r["n_iter"] + 1 <= 7 for r in rows)
    assert script.cap(*args, 6, str(store), None, 1, full) == 0  # resumed: nothing rerun, the same report
    assert capsys.readouterr().out.splitlines() == out and len(log.read_text().splitlines()) == 4


def test_cap_tol_strip_reaches_the_small_skip_posterior(tmp_path, monkeypatch, capsys):
    """`smi_onset.py cap --tol-strip`: the tolerance reaches the posterior at a small skip (the point's own
    value, given explicitly, reruns the default's trajectories bit for bit; a much finer one moves them), each
    tolerance has its own log and is compared with the default tolerance's cap log; a tolerance <= 0 is one
    line and exit 2."""
    script, method, store, full = _cap_point(tmp_path, monkeypatch, 0.1)
    args = (0.1, "alpha1", 30, [3], 6, str(store), None, 1, full)
    assert script.cap(*args, tol_strip=0.0) == 2
    assert "--tol-strip 0.0" in capsys.readouterr().err
    assert script.cap(*args) == 0  # the default tolerance: the log the others are compared with
    assert "against the default" not in capsys.readouterr().out

    def gap(tol_strip):
        assert script.cap(*args, tol_strip=tol_strip) == 0
        line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("against the default"))
        assert f"cap6-v{method.version}.jsonl, 2 instances" in line, line
        return float(line.split("difference ")[1].split(" ")[0])

    from seqphase.core.smi.channels import RESOLUTIONS

    default = RESOLUTIONS[method.settings["posterior"].default].tol_strip
    assert gap(default) == 0.0  # the point's own value, given explicitly
    assert gap(1e-8) > 0.0  # a much finer grid: the trajectories move
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    tols = ("", f"tol{default:g}-", "tol1e-08-")
    assert logs == sorted(f"smi-c0.1-alpha1-d30-cap6-{t}v{method.version}.jsonl" for t in tols)
