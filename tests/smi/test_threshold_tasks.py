"""The threshold method as a graph of works (core/smi/thresholds.py, version 6): a block regenerates its
rows of the point's Sobol set exactly, the blocks' sums add up to the one-pass estimates within rounding,
the driver's distributed point equals the serial `run` bit for bit, and bad k / block settings are refused
before anything runs."""

import numpy as np
import pytest

from seqphase.cluster import run_sweep
from seqphase.core.errors import ParameterError
from seqphase.core.models import get_model, point_stream
from seqphase.core.smi import se as sse
from seqphase.core.smi import thresholds as sth
from seqphase.core.smi.channels import AttentionChannel
from seqphase.results.store import Store
from seqphase.sweeps.planner import plan_sweep
from seqphase.sweeps.spec import load_sweep

# small enough for the default suite (~1 s a point serially at c = 1), several blocks per pass
SMALL = ["method.n_k=1024", "method.n_mc=512", "method.k_coarse=256", "method.block=256", "method.rtol=0.01"]


def _stream():
    return np.random.SeedSequence(43, spawn_key=(5, 0))


def test_block_rows_are_the_rows_of_the_whole_set():
    whole = sse.Draws(2, 2, 2048, np.random.default_rng(_stream()))
    for start, stop in [(0, 256), (256, 512), (1792, 2048), (0, 300)]:
        rows = sse.Draws(2, 2, 2048, np.random.default_rng(_stream()), rows=(start, stop))
        assert np.array_equal(rows.xi, whole.xi[start:stop]) and np.array_equal(rows.u, whole.u[start:stop])


def _blocks(pas, block, skip):
    common = dict(skip=skip, depth=2, eps=1e-3, entropy=_stream().entropy, spawn_key=list(_stream().spawn_key),
                  n_total=1024)
    works = sth.block_works(pas, block, common)
    return sth.add_sums([work.fn(**work.kwargs) for work in works]), len(works)


def test_block_sums_add_up_to_the_one_pass_estimates():
    """Each pass kind over 1024 draws cut into blocks of 256 evaluations against the one-pass estimate on
    the whole set (k_at_zero, layer2_curve, se.qhat: np.mean / np.std over all draws at once): equal within
    floating rounding (1e-12 relative; the standard errors, from sums of squares, 1e-9)."""
    ch = AttentionChannel(2, 1.0)
    draws = sse.Draws(2, 2, 1024, np.random.default_rng(_stream()))
    zero, n_works = _blocks(sth.Pass("zero", sth.Points(1024)), 256, 1.0)
    assert n_works == 4
    k_blocks = sth.k_of(zero, 2)
    G = sth._zero_state_moments(ch, draws, 1e-3)  # version 5's one pass: means and np.std of all draws
    per = np.einsum("natcs,nbtes->nabce", G, G)
    diag = np.einsum("naacc->nac", per)
    assert np.allclose(k_blocks.F, per.mean(0).reshape(4, 4), rtol=1e-12, atol=0)
    assert np.allclose(k_blocks.K, diag.mean(0), rtol=1e-12, atol=0)
    assert np.allclose(k_blocks.K_se, diag.std(0) / np.sqrt(1024), rtol=1e-9, atol=0)
    assert k_blocks.perron == pytest.approx(sth.k_at_zero(ch, draws).perron, rel=1e-12)

    q = 0.95
    curve, _ = _blocks(sth.Pass("curve", sth.Points(512), q), 256, 1.0)
    head = draws.head(512)
    alpha, k11, k11_se = sth.curve_of(q, curve)
    e22, val = sth.curve_values(ch, q, head, 1e-3)  # version 5's one pass: np.mean, np.std of all draws
    assert alpha == pytest.approx(q / ((1 - q) * e22.mean()), rel=1e-12)
    assert k11 == pytest.approx(val.mean(), rel=1e-12) and k11_se == pytest.approx(val.std() / np.sqrt(512), rel=1e-9)

    Q = np.array([[1e-6, 0.0], [0.0, 0.3]])
    gg, n_works = _blocks(sth._gg(sth.Points(512, (0, 1)), Q), 256, 1.0)
    assert n_works == 4  # a ring-paired block holds 128 draws: 256 evaluations
    one_pass = sse.qhat(ch, Q, 0.7, sth.ring_pairs(head, (0, 1)))
    assert np.allclose(sth._qhat(gg, 0.7), one_pass, rtol=1e-12, atol=0)


def test_serial_run_equals_the_distributed_run_bit_for_bit(tmp_path, client):
    """One skip through the driver on the 2-worker LocalCluster (its passes cut into 256-evaluation blocks,
    the routes side by side): every stored variable equals `Threshold.run` (the same generator driven
    serially) bit for bit; the run record shows a graph (many works, longest chain well below the work)."""
    plan = plan_sweep(load_sweep("smi-thresholds", ["skip=1.0"] + SMALL))
    group = Store(tmp_path / "s.zarr").prepare(plan)
    summary = run_sweep(plan, group, client, progress=False)
    assert (summary.done, summary.failed) == (1, 0)
    point = plan.points[0]
    model = get_model("smi")
    expected = model.run("threshold", point.params, plan.sweep.settings, point_stream(plan.sweep.seed, point.seed_key))
    index = group.index_of(point)
    for name, value in expected.items():
        got = group.read(name)[index]
        if name == "note":
            assert str(got) == value
        else:
            assert np.array_equal(got, np.asarray(value, float), equal_nan=True), name
    assert 0.17 < expected["alpha2_stability"] < 0.2 and 0.6 < expected["alpha1_stability"] < 0.9
    record = Store(group.store.path).open_sweep(group.name).attrs["runs"][-1]
    assert record["works"] > 40 and record["chain_s"] < 0.5 * record["work_s"]


def test_bad_k_and_block_are_refused_before_anything_runs():
    model = get_model("smi")
    with pytest.raises(ParameterError, match="method.k"):
        model.check_settings("threshold", {"k": 1})
    settings = model.check_settings("threshold", {"block": 3000})
    with pytest.raises(ParameterError, match="method.block"):
        model.method("threshold").check({"skip": 1.0}, settings)
    settings = model.check_settings("threshold", {"block_strip": 96})
    with pytest.raises(ParameterError, match="method.block_strip"):
        model.method("threshold").check({"skip": 1.0}, settings)
