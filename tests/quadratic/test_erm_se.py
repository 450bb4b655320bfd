"""ERM state evolution of the quadratic network (core/quadratic/erm.py): the spectral-denoising risk against a
finite-d Monte-Carlo, exact moments of rho_xi, the alpha -> 0 and alpha_SR limits, the units of the BO comparison,
the model through the registry and the CLI (bad input: one line, exit 2, store untouched)."""

import math

import numpy as np
import pytest

from cli_run import cli_here, on_cluster
from seqphase.core.errors import ParameterError
from seqphase.core.models import get_model, run_point
from seqphase.core.quadratic import erm, thresholds
from test_store import tree_digest


def _spectral_denoising_draw(d, kappa_star, xi, q, kappa, rng):
    """One finite-d draw of Y = S* + sqrt(xi) Z (Z GOE: off-diagonal variance 1/d, diagonal 2/d) and the PSD soft
    threshold f(x) = (x - q)_+ keeping the top kappa d (kappa < 1): (1/d)||f(Y) - S*||^2."""
    m_star = int(round(kappa_star * d))
    w = rng.standard_normal((d, m_star))
    s_star = w @ w.T / m_star
    a = rng.standard_normal((d, d))
    values, vectors = np.linalg.eigh(s_star + math.sqrt(xi) * (a + a.T) / math.sqrt(2 * d))
    f = np.maximum(values - q, 0.0)
    if kappa < 1:
        f[: d - int(round(kappa * d))] = 0.0
    return np.sum(((vectors * f) @ vectors.T - s_star) ** 2) / d


@pytest.mark.parametrize("kappa_star, xi, q, kappa", [(0.5, 0.1, 0.2, 2.0), (0.5, 0.3, 0.1, 0.3),
                                                  pytest.param(2.0, 0.5, 0.3, 2.0, marks=pytest.mark.slow)])
def test_risk_matches_finite_d_spectral_denoising(kappa_star, xi, q, kappa):
    """MSE(xi, q) of spec §2 is the exact risk of the spectral estimator: 4 draws at d = 200. Tolerance: 4 standard
    errors of the mean plus a finite-d allowance 1/d relative (the 1/d corrections of the GOE/MP spectra; measured
    at d = 500 the deviations were 0.1-0.4 % with 8 draws, within 2 standard errors)."""
    d, draws = 200, 4
    rng = np.random.default_rng(20261125)
    values = np.array([_spectral_denoising_draw(d, kappa_star, xi, q, kappa, rng) for _ in range(draws)])
    curve = erm.ERMCurve(kappa_star, kappa, 0.0, 0.1)
    theory, _, _ = curve.denoising.risk(xi, q, curve.omega(xi))
    stderr = values.std(ddof=1) / math.sqrt(draws)
    assert abs(values.mean() - theory) < 4 * stderr + theory / d


@pytest.mark.parametrize("kappa_star", [0.1, 0.5, 1.0, 2.0])
def test_exact_moments_of_rho_xi(kappa_star):
    """Over the whole support: mass 1, integral rho h = 0, integral rho h x = 1/2 (symmetrisation of the double
    integral), second moment Q0 + xi (the semicircle adds variance xi). Checks the quadrature pieces (incl. the
    dip cut after a merge, kappa_star = 0.5, xi ~ 0.1-0.3) and the small-xi grading."""
    den = erm.SpectralDenoising(kappa_star)
    for xi in (1e-10, 1e-6, 1e-2, 0.1, 0.3, 1.0, 1e4):
        below, above = den.bulks(xi)[0][0] - 1.0, den.bulks(xi)[-1][1] + 1.0
        whole, none = den.integrals(xi, below), den.integrals(xi, above)
        assert abs(whole.mass_above - 1) < 1e-9 and abs(whole.h1_above - 0.5) < 1e-9
        assert abs(whole.h0_above) < 1e-7  # 1e-8 measured at kappa_star = 1, xi = 1e-10 (hard-edge peak)
        assert abs(none.x2_below / (den.q0 + xi) - 1) < 1e-9


def test_identity_estimator_flat_segment_kappa_star_above_one():
    """kappa_star = 2 (S* positive definite): at small xi the spectrum of Y is positive, q = 0 leaves S_hat = Y, so
    E = xi exactly and alpha = E/(2 xi) = 1/2 for a whole range of xi (q = 0 up to the rounding of the q-equation,
whose excess vanishes identically there): the noiseless lam -> 0+ error jumps from
    ~xi_c to 0 at alpha_SR = 1/2 (first-order: min-trace interpolation hits the PSD boundary at O(1) distance)."""
    curve = erm.erm_curve(2.0, 2.0, 0.0, 0.0)  # shared with the alpha_SR bisection
    s = curve.state_at_xi(1e-3)
    assert s.q < 1e-8 and abs(s.test_error / 1e-3 - 1) < 1e-8 and abs(s.alpha - 0.5) < 1e-9
    # E -> xi_c ~ 0.035 (the xi where the lower edge of rho_xi reaches 0), not 0, as alpha -> 1/2 from below
    assert curve.at_alpha(0.499).test_error > 0.02 and curve.at_alpha(0.49999).test_error > 0.02
    assert curve.at_alpha(0.501).test_error == 0.0


def test_error_vanishes_at_alpha_sr_and_not_before():
    """Noiseless, lam -> 0+, convex student: the error is 0 beyond alpha_SR (statistical dimension), positive below
    and ~ (alpha_SR - alpha)^2 near it (E = 2 alpha xi, alpha_SR - alpha ~ sqrt(xi))."""
    a_sr, _ = thresholds.alpha_sr_statistical_dimension(0.5)
    curve = erm.erm_curve(0.5, 2.0, 0.0, 0.0)
    assert curve.at_alpha(a_sr * (1 + 1e-4)).test_error == 0.0
    e1, e2 = curve.at_alpha(a_sr * (1 - 1e-2)).test_error, curve.at_alpha(a_sr * (1 - 2e-2)).test_error
    assert 0 < e1 < e2 and 3.0 < e2 / e1 < 5.0


def test_alpha_to_zero_gives_q0():
    """alpha -> 0: S_hat -> 0 and the test error -> Q0 = 1 + 1/kappa_star (S' units), 1 + kappa_star in the BO units.
    The approach is slow: at small alpha, lam is negligible beside the top edge ~ 2 sqrt(xi) of the spectrum, the
    estimator is the min-nuclear-norm interpolator and E - Q0 ~ alpha^{1/3} (alpha x100 -> x4.64; measured x4.4)."""
    for kappa_star, lam in ((0.5, 0.0), (2.0, 0.1)):
        q0 = 1 + 1 / kappa_star
        curve = erm.erm_curve(kappa_star, 2.0, 0.0 if lam == 0 else 0.5, lam)
        small, larger = curve.at_alpha(1e-5), curve.at_alpha(1e-3)
        assert 0 < small.test_error - q0 < 0.02 * q0
        assert 3.5 < (larger.test_error - q0) / (small.test_error - q0) < 6.0
        assert abs(small.test_error_bo - kappa_star * small.test_error) < 1e-15 * q0


def test_bo_units_conversion_finite_d():
    """test_error_bo = kappa_star * test_error is (1/d^2)||S_hat_BO - S*_BO||^2 with S*_BO = W*^T W*/sqrt(m*) =
    sqrt(m*) S*': exact identity on an instance."""
    rng = np.random.default_rng(3)
    d, m_star = 60, 30
    w = rng.standard_normal((m_star, d))
    s_prime, s_hat = w.T @ w / m_star, np.diag(rng.random(d))
    err_prime = np.sum((s_hat - s_prime) ** 2) / d
    err_bo = np.sum((math.sqrt(m_star) * s_hat - w.T @ w / math.sqrt(m_star)) ** 2) / d**2
    assert abs(err_bo - (m_star / d) * err_prime) < 1e-12 * err_bo


def test_q_equation_and_train_loss():
    """At lam > 0 the point solves q (1 - J/alpha) = lam and train_loss = lam^2 alpha xi / q^2 (spec §2)."""
    s = erm.erm_state(0.3, 0.5, 2.0, 0.5, 0.1)
    assert abs(s.q * (1 - s.divergence / s.alpha) - 0.1) < 1e-10
    assert abs(s.train_loss - 0.1**2 * s.alpha * s.xi / s.q**2) < 1e-12
    assert abs(s.alpha - 0.3) < 1e-10 and abs(s.test_error_bo - 0.5 * s.test_error) < 1e-15


def test_uncovered_combinations_refused():
    with pytest.raises(ParameterError) as err:
        erm.check_covered({"kappa": 0.5, "lam": 0.0})
    assert err.value.field == "params.kappa"
    erm.check_covered({"kappa": 0.5, "lam": 0.1})
    erm.check_covered({"kappa": 2.0, "lam": 0.0})


def test_fold_traced_through_the_interpolation_threshold():
    """kappa_star = 0.1, kappa = 2, delta = 0.5: the xi-table jumps from alpha = 0.333 to 0.173 in one cell (the
    fold of the solution curve; at fixed alpha = 0.234 no xi solves the alpha equation for q < 0.5). Points inside
    the fold solve both SE equations; alpha falls along the traced curve; lam = 1e-7 and the exact lam = 0 agree
    on the interpolating branch (q = O(1)); the lam = 0 curve meets the q = 0 branch at the dedicated equation's
    alpha_interp (thresholds.alpha_interp_equation: an independent root of alpha(xi, 0) = J(xi, 0))."""
    small = erm.ERMCurve(0.1, 2.0, 0.5, 1e-7)
    exact = erm.ERMCurve(0.1, 2.0, 0.5, 0.0)
    for alpha in (0.2, 0.234, 0.3):
        s = small.at_alpha(alpha)
        assert abs(s.alpha - alpha) < 1e-9 * alpha
        assert abs(s.q * (1 - s.divergence / s.alpha) - 1e-7) < 1e-9  # the q-equation
    (fold,) = small.folds.values()
    assert np.all(np.diff(fold.points[:, 2]) < 0) and fold.points[0, 2] > 0.3 > 0.2 > fold.points[-1, 2]
    a, b = small.at_alpha(0.234), exact.at_alpha(0.234)
    assert b.q > 0.1 and abs(a.test_error - b.test_error) < 1e-5 * b.test_error
    (fold,) = exact.folds.values()
    assert fold.q_zero_branch and abs(fold.points[0, 2] - thresholds.alpha_interp_equation(0.1, 2.0, 0.5)) < 1e-7
    above = exact.at_alpha(0.2776)  # between alpha_interp = 0.27751 and the table: the q = 0 branch
    assert above.q == 0.0 and abs(above.alpha - 0.2776) < 1e-9


@pytest.mark.slow
def test_non_monotone_continuation_refused():
    """The case behind check_covered: kappa < 1, lam -> 0+ has a spurious q = 0 branch at large xi."""
    with pytest.raises(erm.ERMCurveError):
        erm.ERMCurve(0.1, 0.2, 0.0, 0.0).table()


def test_point_through_the_registry():
    model = get_model("quadratic-erm")
    settings = model.check_settings("se", {})
    out = run_point("quadratic-erm", "se", {"alpha": 0.3, "kappa_star": 0.5, "kappa": 2.0, "delta": 0.5,
                                            "lam": 0.1}, settings, 1, [0])
    s = erm.erm_state(0.3, 0.5, 2.0, 0.5, 0.1)
    assert float(out["test_error"]) == s.test_error and float(out["train_loss"]) == s.train_loss
    assert 0 < float(out["bo_mse"]) < float(out["test_error_bo"])  # BO beats ERM


@pytest.fixture(scope="module")
def erm_store(tmp_path_factory, client):
    store = tmp_path_factory.mktemp("ermcli") / "s.zarr"
    code, _, err = cli_here("run", "quadratic-erm-se", "--set", "kappa_star=0.5", "--set", "kappa=2", "--set",
                            "lam=0.1", "--set", "delta=0.5", "--set", "alpha=0.1,0.4", "--store", store,
                            *on_cluster(client), "--no-progress")
    assert code == 0, err
    return store


def test_shipped_sweep_runs_and_plots(erm_store, tmp_path):
    code, out, err = cli_here("query", "quadratic-erm-se", "--store", erm_store)
    assert code == 0, err
    assert len(out.strip().splitlines()) == 1 + 2 and "test_error" in out.splitlines()[0]
    code, _, err = cli_here("plot", "quadratic-erm-se", "-o", tmp_path / "erm.png", "--store", erm_store)
    assert code == 0 and (tmp_path / "erm.png").stat().st_size > 10000, err


@pytest.mark.parametrize("args, words", [
    (["--set", "kappa=0"], "params.kappa"),
    (["--set", "kappa_star=-1"], "params.kappa_star"),
    (["--set", "delta=-0.1"], "params.delta"),
    (["--set", "lam=-1"], "params.lam"),
    (["--set", "kappa=0.5", "--set", "lam=0"], "params.kappa"),
])
def test_bad_input_one_line_exit_2_store_untouched(erm_store, args, words):
    before = tree_digest(erm_store)
    code, out, err = cli_here("run", "quadratic-erm-se", *args, "--store", erm_store, "--workers", "1", "--no-progress")
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], err
    assert tree_digest(erm_store) == before
