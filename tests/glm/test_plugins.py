"""User channels and priors (core/plugins.py) in the glm family: derived quantities against closed forms,
re-implementations of shipped channels and priors against the shipped results, thresholds, GAMP against
the SE, naming and identity, bad input, `seqphase check`, and the Python API on a user's client.

Tolerances. The derived quadrature's relative tolerance is 1e-11 (`DerivedScalarChannel.tol`); measured
on probit and sign its g_out and dg are within 1e-10 of the closed forms, so 1e-8 leaves a factor 100.
An SE fixed point amplifies a perturbation of its map by 1 / (1 - slope), at most ~100 away from a
transition: the SE of a re-implemented channel or prior must agree with the shipped one within 1e-7.
"""

import json
import math
import sys
import textwrap

import numpy as np
import pytest
from scipy import stats

import userplugins
from seqphase import api
from seqphase.cli import main as cli_main
from seqphase.core import plugins
from seqphase.core.errors import ParameterError
from seqphase.core.glm import se, thresholds
from seqphase.core.glm.model import build
from seqphase.sweeps.planner import plan_sweep

SE_TOL = 1e-7


def point(channel, prior="gaussian", **extra):
    return {"prior": prior, "channel": channel, "rho": 1.0, "delta": 0.0, **extra}


@pytest.mark.parametrize("delta", [0.1, 1e-3])
def test_probit_derived_g_out_matches_its_closed_form(delta):
    derived = plugins.DerivedScalarChannel(userplugins.Probit(delta=delta), use_closed_forms=False)
    closed = userplugins.ClosedProbit(delta=delta)
    for V in (1e-3, 0.3, 1.0, 3.0):
        s = math.sqrt(V + delta)
        omega = np.linspace(-8.0, 8.0, 161) * s  # |u| = |omega| / sqrt(V + delta) up to 8: far into the tails
        for label in (-1.0, 1.0):
            y = np.full(omega.shape, label)
            Vb = np.full(omega.shape, V)
            g, dg = derived.derived_g_out(y, omega, Vb)
            gc, dgc = closed.g_out(y, omega, Vb)
            assert np.max(np.abs(g - gc) / (1 + np.abs(gc))) < 1e-8
            assert np.max(np.abs(dg - dgc) / (1 + np.abs(dgc))) < 1e-8
            assert np.max(np.abs(derived.moments(y, omega, Vb)[0] - closed.log_partition(y, omega, Vb))) < 1e-8


def test_shared_rule_equals_per_sample_rule():
    """SE integrates a discrete label at many omegas on one shared rule, GAMP per sample: the same integral."""
    channel = plugins.DerivedScalarChannel(userplugins.Probit(delta=0.05))
    omega = np.linspace(-4, 4, 101)
    for V in (0.02, 0.7):
        shared = channel.shared_moments(1.0, omega, V)
        alone = channel._moments(np.ones_like(omega), omega, np.full(omega.shape, V))
        for a, b in zip(shared, alone):
            assert np.max(np.abs(a - b)) < 1e-9


@pytest.mark.parametrize("delta", [None, 0.1, 1e-3])
def test_label_table_matches_the_closed_forms(delta):
    """The SE's rule (`label_table`: every label at every cavity of one V) against Z_out, E[t | y] and
    Var[t | y] in closed form (sign: u = y omega / sqrt(V); probit: the same with V + delta), weighted by
    Z_out as the SE uses them (delta None: sign). Tolerance 1e-11: the kernel rule's bound (`kernel_tol` = 1e-12 per moment)
    and the features' (`feature_tol`), with a factor 5 for the variance's cancellation (measured <= 9e-13)."""
    plugin = userplugins.Sign() if delta is None else userplugins.Probit(delta=delta)
    derived = plugins.DerivedScalarChannel(plugin)
    for V in (1.0, 0.3, 1e-2, 1e-4):
        s = math.sqrt(V)
        omega = math.sqrt(1 - V) * np.linspace(-9.0, 9.0, 301)
        log_z, mean, var = derived.label_table(omega, V)
        for row, y in enumerate(derived.labels):
            if delta is None:
                u = y * omega / s
                ratio = np.exp(stats.norm.logpdf(u) - stats.norm.logcdf(u))
                z_out, exact_mean, exact_var = stats.norm.cdf(u), y * ratio, 1 - ratio * (u + ratio)
            else:
                closed = userplugins.ClosedProbit(delta=delta)
                g, dg = closed.g_out(y, omega, V)
                z_out, exact_mean, exact_var = np.exp(closed.log_partition(y, omega, V)), g * s, 1 + dg * V
            assert np.max(np.abs(np.exp(log_z[row]) - z_out)) < 1e-11
            assert np.max(z_out * np.abs(mean[row] - exact_mean)) < 1e-11
            assert np.max(z_out * np.abs(var[row] - exact_var)) < 1e-11


def test_label_table_of_a_band_matches_the_closed_forms():
    """y = sign(|z| - theta): two steps at +-theta, off the kernel grid, and flat stretches between them
    that `label_table` integrates in closed form. Each label's mass and moments are those of N(omega, V)
    over its intervals (closed forms from Phi and phi at the ends); tolerance as above."""
    theta = 0.7
    derived = plugins.DerivedScalarChannel(userplugins.Band(theta=theta))

    def over(a, b):  # int_a^b t^k phi(t) dt, k = 0, 1, 2 (|t| = 60: the Gaussian is 0 in float64)
        pa, pb = stats.norm.pdf(a), stats.norm.pdf(b)
        mass = stats.norm.cdf(b) - stats.norm.cdf(a)
        return np.stack([mass, pa - pb, mass + a * pa - b * pb])

    for V in (1.0, 0.3, 1e-2, 1e-4):
        s = math.sqrt(V)
        omega = math.sqrt(1 - V) * np.linspace(-9.0, 9.0, 301)
        lo, hi = (-theta - omega) / s, (theta - omega) / s
        inside = over(lo, hi)
        outside = over(np.full_like(lo, -60.0), lo) + over(hi, np.full_like(hi, 60.0))
        log_z, mean, var = derived.label_table(omega, V)
        for row, y in enumerate(derived.labels):
            mass, first, second = outside if y > 0 else inside
            assert np.max(np.abs(np.exp(log_z[row]) - mass)) < 1e-11
            assert np.max(np.abs(np.exp(log_z[row]) * mean[row] - first)) < 1e-11
            assert np.max(np.abs(np.exp(log_z[row]) * (var[row] + mean[row] ** 2) - second)) < 1e-11


def test_channel_plugin_tags_name_their_derivation_version():
    """A p = 1 channel's points carry the p = 1 derivation's version, a p = 2 channel's the p = 2 one's, so
    that a change of one derivation recomputes only its own points."""
    scalar = plugins.load("userplugins:Probit", "channel")
    vector = plugins.load("userplugins:SignProduct", "channel")
    assert scalar.tag.endswith(f"/derived-v{plugins.DERIVED_CHANNEL_VERSION}")
    assert vector.tag.endswith(f"/derived-v{plugins.DERIVED_VECTOR_CHANNEL_VERSION}")


def test_probit_se_equals_closed_form_se():
    prior, derived = build(point("userplugins:Probit", delta=0.1))
    _, closed = build(point("userplugins:ClosedProbit", delta=0.1))
    assert closed.closed_g_out is not None and derived.closed_g_out is None
    for alpha in (0.5, 2.0, 5.0):
        a, b = se.glm_se(prior, derived, alpha), se.glm_se(prior, closed, alpha)
        assert abs(a.overlap - b.overlap) < SE_TOL and abs(a.gen_error - b.gen_error) < SE_TOL
        assert abs(a.free_entropy - b.free_entropy) < SE_TOL


def test_user_sign_reproduces_the_shipped_perceptron_se():
    prior, user = build(point("userplugins:Sign"))
    _, shipped = build(point("sign"))
    for alpha in (0.5, 2.0, 5.0):
        a, b = se.glm_se(prior, user, alpha), se.glm_se(prior, shipped, alpha)
        assert abs(a.overlap - b.overlap) < SE_TOL
        assert abs(a.gen_error - b.gen_error) < SE_TOL
        assert abs(a.free_entropy - b.free_entropy) < SE_TOL


def test_user_binary_prior_reproduces_the_shipped_binary_perceptron_se():
    """Both branches across the first-order transition (alpha = 1.3: between the information-theoretic
    threshold ~1.25 and the AMP spinodal ~1.49) and above it."""
    user_prior, channel = build(point("sign", prior="userplugins:Binary"))
    shipped_prior, _ = build(point("sign", prior="rademacher"))
    assert user_prior.rho == 1.0 and user_prior.mean == 0.0
    for mhat in (0.1, 1.0, 10.0):
        assert abs(user_prior.mmse(mhat) - shipped_prior.mmse(mhat)) < 1e-12
        assert abs(user_prior.free_entropy(mhat) - shipped_prior.free_entropy(mhat)) < 1e-12
    for alpha in (1.3, 1.7):
        a = se.glm_se_branches(user_prior, channel, alpha)
        b = se.glm_se_branches(shipped_prior, channel, alpha)
        for branch in ("amp", "informed", "bayes"):
            assert abs(a[branch].mse - b[branch].mse) < SE_TOL
            assert abs(a[branch].free_entropy - b[branch].free_entropy) < SE_TOL


def test_user_continuous_prior_denoiser_matches_the_gaussian():
    prior, _ = build(point("sign", prior="userplugins:Normal"))
    B = np.linspace(-6, 6, 25)
    for A in (1e-6, 0.5, 3.0, 1e4):
        mean, var = prior.denoise(B * max(A, 1.0), np.full(B.shape, A))
        assert np.max(np.abs(mean - B * max(A, 1.0) / (1 + A))) < 1e-8 * (1 + max(A, 1.0))
        assert np.max(np.abs(var - 1 / (1 + A))) < 1e-9
    assert abs(prior.rho - 1.0) < 1e-10 and abs(prior.mmse(2.0) - 1 / 3) < 1e-9


def test_even_user_channel_weak_recovery_threshold_closed_form():
    """y = sign(|z| - theta): alpha_c = p (1 - p) / (4 theta^2 phi(theta)^2), p = 2 Phi(-theta), from
    E_y[dg(y, 0, 1)^2] with E[z^2 | y] - 1 = +-2 theta phi(theta) / P(y)."""
    for theta in (0.5, 1.0):
        prior, channel = build(point("userplugins:Band", theta=theta))
        assert channel.even
        p = 2 * stats.norm.cdf(-theta)
        closed = p * (1 - p) / (4 * theta**2 * stats.norm.pdf(theta) ** 2)
        assert abs(thresholds.weak_recovery_stability(prior, channel) - closed) < 1e-9 * closed
    # the SE route's predicate on either side of it (theta = 1: alpha_c = 0.92496)
    prior, channel = build(point("userplugins:Band", theta=1.0))
    assert not thresholds.weak_recovered(prior, channel, 0.8)
    assert thresholds.weak_recovered(prior, channel, 1.1)


def test_probit_weak_recovery_is_trivial():
    """A channel that is not even gives information at m = 0: weak recovery needs no threshold (0)."""
    prior, channel = build(point("userplugins:Probit", delta=0.1))
    assert not channel.even
    assert thresholds.weak_recovery_stability(prior, channel) == 0.0


# -- naming, identity, provenance ----------------------------------------------------------------------

def spec(channel="userplugins:Probit", **params):
    return {"name": "probit-se", "model": "glm", "seed": 3,
            "params": {"prior": "gaussian", "channel": channel, "alpha": [0.5, 2.0], **params},
            "method": {"name": "se"}}


def test_plugin_keywords_are_parameters_and_the_source_hash_is_in_the_identity(tmp_path, monkeypatch):
    plan = plan_sweep(api.load(spec(delta=[0.05, 0.1])))
    assert plan.coords["delta"] == [0.05, 0.1] and len(plan.points) == 4
    assert plan.plugins[0]["class"] == "Probit" and len(plan.plugins[0]["sha256"]) == 64
    module = tmp_path / "editable_channel.py"
    source = textwrap.dedent('''
        import numpy as np
        import seqphase
        class Step(seqphase.Likelihood):
            labels = (-1.0, 1.0)
            def __init__(self, kappa=0.5):
                self.kappa = kappa
            def log_likelihood(self, y, z):
                return np.where(y * (z - self.kappa) >= 0, 0.0, -np.inf)
            def sample(self, z, rng):
                return np.where(z >= self.kappa, 1.0, -1.0)
        ''')
    module.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    first = plan_sweep(api.load(spec("editable_channel:Step")))
    assert first.coords["kappa"] == [0.5]
    module.write_text(source + "\n# edited\n")
    plugins._import.cache_clear()
    second = plan_sweep(api.load(spec("editable_channel:Step")))
    assert [p.hash for p in first.points] != [p.hash for p in second.points]
    assert [p.seed_key for p in first.points] == [p.seed_key for p in second.points]  # same instances
    plugins._import.cache_clear()
    sys.modules.pop("editable_channel", None)


def test_shipped_point_hashes_do_not_depend_on_plugins():
    from seqphase.sweeps.planner import point_hash
    from seqphase.sweeps.spec import load_sweep

    plan = plan_sweep(load_sweep("glm-perceptron-se"))
    point = plan.points[0]
    assert point.hash == point_hash(plan.identity, point.params, "glm/se/v1")
    assert plan.plugins == []


@pytest.mark.parametrize("target, words", [
    ("userplugins:ReturnsNaN", "ReturnsNaN.log_likelihood returned NaN"),
    ("userplugins:WrongShape", "WrongShape.sample returned shape (3,)"),
    ("nosuchmodule:Probit", "cannot import 'nosuchmodule:Probit'"),
    ("userplugins:Binary", "is not a seqphase.Likelihood subclass"),
    (":Probit", "is not a 'module:Class' name"),
])
def test_bad_plugin_is_one_line_exit_2(tmp_path, capsys, target, words):
    path = tmp_path / "bad.toml"
    path.write_text(f'name = "bad"\nmodel = "glm"\n[params]\nalpha = 1.0\nchannel = "{target}"\n'
                    '[method]\nname = "se"\n')
    code = cli_main(["run", str(path), "--store", str(tmp_path / "store.zarr")])
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1 and "params.channel" in err
    assert not (tmp_path / "store.zarr").exists()


def _registers(site, distribution, group, points):
    """`distribution` installed in the folder `site`, as importlib.metadata reads it: its dist-info with the
    entry points {name: "module:Class"} of `group`."""
    folder = site / f"{distribution}-0.1.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    (folder / "entry_points.txt").write_text(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()))


def test_a_short_name_an_installed_package_registers(tmp_path, monkeypatch):
    """A package that registers `probit` under seqphase.channels (core/registry.py reads the entry points when a
    name is looked up): a spec's channel = "probit" loads it; a second package registering the same name is an
    error naming both."""
    _registers(tmp_path / "one", "probit_plugins", "seqphase.channels", {"probit": "userplugins:Probit"})
    monkeypatch.syspath_prepend(str(tmp_path / "one"))
    info = plugins.load("probit", "channel")
    assert info.cls is userplugins.Probit and info.name == "probit"
    assert plugins.load_either("probit", "MODULE:CLASS")[0] == "channel"
    assert build(point("probit", delta=0.1))[1].plugin.delta == 0.1
    _registers(tmp_path / "two", "other_plugins", "seqphase.channels", {"probit": "userplugins:ClosedProbit"})
    monkeypatch.syspath_prepend(str(tmp_path / "two"))
    with pytest.raises(ParameterError, match="two distributions register the channel 'probit'") as error:
        plugins.load("probit", "channel")
    assert "userplugins:Probit (from probit_plugins)" in str(error.value)
    assert "userplugins:ClosedProbit (from other_plugins)" in str(error.value)


def test_plugin_constructor_error_names_the_class_and_values(tmp_path, capsys):
    code = cli_main(["run", "glm-perceptron-se", "--set", "channel=userplugins:Probit", "--set", "delta=0",
                     "--set", "alpha=1", "--store", str(tmp_path / "s.zarr")])
    err = capsys.readouterr().err
    assert code == 2 and "userplugins:Probit(delta=0.0) raised ValueError: delta must be > 0" in err
    # the model's own range of a parameter it shares with the plug-in comes first
    code = cli_main(["run", "glm-perceptron-se", "--set", "channel=userplugins:Probit", "--set", "delta=-1",
                     "--set", "alpha=1", "--store", str(tmp_path / "s.zarr")])
    assert code == 2 and "params.delta: value -1.0 is out of range" in capsys.readouterr().err
    assert not (tmp_path / "s.zarr").exists()


def test_check_refuses_the_flipped_sampler_and_accepts_the_honest_one(capsys):
    assert cli_main(["check", "userplugins:FlippedProbit"]) == 1
    captured = capsys.readouterr()
    assert "FAILS" in captured.out and "label law" in captured.err and "nishimori" in captured.err
    assert cli_main(["check", "userplugins:ClosedProbit", "--set", "delta=0.2"]) == 0
    out = capsys.readouterr().out
    assert "closed form g_out" in out and "FAILS" not in out
    assert cli_main(["check", "userplugins:Binary"]) == 0
    assert cli_main(["check", "userplugins:Probit", "--set", "nope=1"]) == 2


# -- the Python API on a client the user holds ---------------------------------------------------------

def test_run_dict_spec_on_a_user_client(client, tmp_path):
    store = tmp_path / "api.zarr"
    ds = api.run(spec(delta=0.1), store=store, client=client, progress=False)
    assert client.status == "running"  # seqphase never closes a client it was given
    prior, channel = build(point("userplugins:Probit", delta=0.1))
    for alpha in (0.5, 2.0):
        expected = se.glm_se_branches(prior, channel, alpha)["bayes"]
        value = float(ds["overlap"].sel(alpha=alpha).squeeze())
        assert abs(value - expected.overlap) < 1e-12
    recorded = json.loads(ds.attrs["plugins"])
    assert recorded[0]["module"] == "userplugins" and recorded[0]["class"] == "Probit"
    assert api.status("probit-se", store=store).done == 2


def test_interrupt_leaves_the_store_resumable(client, tmp_path, monkeypatch):
    """A KeyboardInterrupt at the driver (a notebook's stop button) while points are in flight: raised
    again, what was stored stays, the lock is released, and the same call finishes the rest."""
    store = tmp_path / "interrupt.zarr"
    sweep = spec(alpha={"start": 0.3, "stop": 3.0, "num": 5})

    class StopAfterFirst:
        def __init__(self):
            self.lines = 0

        def write(self, text):
            if "points," in text:
                self.lines += 1
                raise KeyboardInterrupt
        def flush(self):
            pass

        def isatty(self):
            return False

    monkeypatch.setattr(sys, "stderr", StopAfterFirst())
    with pytest.raises(KeyboardInterrupt):
        api.run(sweep, store=store, client=client)
    monkeypatch.undo()
    interrupted = api.status("probit-se", store=store)
    assert 1 <= interrupted.done < 5 and "interrupted" in interrupted.runs[-1]["outcome"]
    ds = api.run(sweep, store=store, client=client, progress=False)
    assert api.status("probit-se", store=store).done == 5 and np.isfinite(ds["overlap"].values).all()


def test_user_class_that_raises_is_recorded_failed(client, tmp_path):
    store = tmp_path / "raises.zarr"
    with pytest.warns(UserWarning, match="2 points of probit-se failed"):
        api.run(spec("userplugins:RaisesOnBatches"), store=store, client=client, retries=0, progress=False)
    status = api.status("probit-se", store=store)
    assert status.done == 0 and status.failed == 2
    assert "RaisesOnBatches.log_likelihood raised RuntimeError: this channel is broken" in status.failures[0][1]


@pytest.mark.parametrize("d, n_seeds", [
    (300, 8),
    pytest.param(1000, 16, marks=pytest.mark.slow),  # the size: ~40 CPU-s
])
def test_probit_gamp_lands_on_its_se(client, tmp_path, d, n_seeds):
    """GAMP on the derived channel against the SE of the same channel: the seeds' mean within 3 s.e."""
    sweep = {"name": "probit-gamp", "model": "glm", "seed": 5,
             "params": {"prior": "gaussian", "channel": "userplugins:Probit", "delta": 0.1, "alpha": 2.0},
             "method": {"name": "gamp", "d": d, "n_seeds": n_seeds, "max_iter": 40}}
    ds = api.run(sweep, store=tmp_path / "gamp.zarr", client=client, progress=False)
    final = ds["overlap"].isel(iteration=-1).squeeze().values
    se_value = float(ds["overlap_se"].squeeze())
    standard_error = final.std(ddof=1) / math.sqrt(final.size)
    assert abs(final.mean() - se_value) < 3 * standard_error
    assert int(ds["converged"].sum()) == n_seeds


def test_python_api_lists_and_reexports():
    import seqphase

    names = [row["name"] for row in seqphase.list_sweeps()]
    assert "glm-perceptron-se" in names
    assert seqphase.run is api.run and seqphase.Likelihood is plugins.Likelihood


@pytest.mark.parametrize("target, words", [
    ("nosuchmodule:Probit", "cannot import 'nosuchmodule:Probit'"),
    ("userplugins:np", "is neither a seqphase.Likelihood nor a seqphase.Prior"),
    ("not-registered", "no channel or prior named 'not-registered'"),
])
def test_check_bad_target_is_one_line_exit_2(capsys, target, words):
    assert cli_main(["check", target]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


# -- a continuous label, and the onset method, with a user channel ----------------------------------------

def _linear_se_sensitivity(alpha, V, delta):
    """|dV*/de| at the SE fixed point V* = 1 / (1 + mhat(V*) + e) of a N(0, 1) prior and the linear channel,
    mhat(V) = alpha / (V + delta), for a constant error e of the channel's mhat: to first order
    (1 + mhat)^-2 / (1 + mhat'(V*) (1 + mhat)^-2), mhat'(V) = -alpha / (V + delta)^2 (V* = 1 - overlap, so
    this is also the overlap's sensitivity)."""
    mhat = alpha / (V + delta)
    return (1 + mhat) ** -2 / (1 - alpha / ((V + delta) ** 2 * (1 + mhat) ** 2))


@pytest.mark.parametrize("alpha", [0.5, 2.0])
def test_continuous_user_channel_reproduces_the_linear_channel_se(alpha):
    """y = z + sqrt(delta) n as a plug-in against the shipped linear channel.

    Tolerance, from the quadratures: the y rule integrates P(y | z) to one within `y_tol` (1e-9) and the
    kernel rule each node's Z_out and moments within `kernel_tol` (1e-12), so E over y of g_out^2 (of
    size 1 / (V + delta)) is within ~2e-9 of it relative: mhat within 1e-8 relative, and the overlap
    within 1e-8 mhat times the fixed point's sensitivity to mhat (`_linear_se_sensitivity`)."""
    delta = 0.5
    prior, user = build(point("userplugins:GaussianNoise", delta=delta))
    _, shipped = build(point("linear", delta=delta))
    exact = se.glm_se(prior, shipped, alpha)
    m, V = exact.overlap, exact.mse
    mhat = alpha / (V + delta)
    assert abs(se.channel_mhat(user, alpha, m, V) - mhat) < 1e-8 * mhat
    derived = se.glm_se(prior, user, alpha)
    assert derived.converged
    assert abs(derived.overlap - exact.overlap) < 1e-8 * mhat * _linear_se_sensitivity(alpha, V, delta)
    assert abs(derived.free_entropy - exact.free_entropy) < 1e-8
    assert abs(derived.gen_error - exact.gen_error) < 1e-8


def test_continuous_user_channel_gamp_follows_the_linear_channel():
    """The same instance (the user's sampler draws what the shipped one draws from the same stream): GAMP
    on the derived channel follows the closed forms' GAMP; g_out of each sample by the per-sample adaptive
    rule (1e-11 relative) keeps the traces within 1e-8. The agreement is per sample and deterministic, so a
    small instance (d = 100) checks it as well as a large one."""
    from seqphase.core import gamp as loop
    from seqphase.core.glm import gamp

    prior, user = build(point("userplugins:GaussianNoise", delta=0.5))
    _, shipped = build(point("linear", delta=0.5))
    F, x, y = gamp.sample_instance(prior, shipped, 2.0, 100, np.random.default_rng(3))
    _, _, y_user = gamp.sample_instance(prior, user, 2.0, 100, np.random.default_rng(3))
    assert np.array_equal(y, y_user)
    a = loop.iterate(gamp.GLMSteps(prior, user, F, y, x, np.random.default_rng(4)), max_iter=15, tol=0.0)
    b = loop.iterate(gamp.GLMSteps(prior, shipped, F, y, x, np.random.default_rng(4)), max_iter=15, tol=0.0)
    assert np.max(np.abs(a.overlap - b.overlap)) < 1e-8 and np.max(np.abs(a.mse - b.mse)) < 1e-8


def test_onset_method_runs_with_a_user_channel(client, tmp_path):
    """The glm onset method with a user channel: the even Band (theta = 1, weak recovery at alpha_c =
    0.92496) at small sizes and few seeds. The extrapolated onset must be finite and within 4 of its
    standard errors of alpha_c (the rule's error covers the seeds' spread; at these sizes it is wide)."""
    sweep = {"name": "band-onset", "model": "glm", "seed": 11,
             "params": {"prior": "gaussian", "channel": "userplugins:Band", "theta": 1.0},
             "method": {"name": "onset", "sizes": [60, 120], "n_seeds": 3, "alpha_lo": 0.3, "alpha_hi": 3.0,
                        "alpha_n": 4, "max_iter": 20}}
    store = tmp_path / "onset.zarr"
    ds = api.run(sweep, store=store, client=client, progress=False)
    assert api.status("band-onset", store=store).done == 1
    value, error = float(ds["alpha_gamp"].squeeze()), float(ds["alpha_gamp_se"].squeeze())
    assert math.isfinite(value) and 0 < error and abs(value - 0.92496) < 4 * error
