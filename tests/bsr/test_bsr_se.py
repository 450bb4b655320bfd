"""Bayes-optimal SE of BSR (core/bsr/se.py) against the spec's numbers (§8b), the published beta = 1 curves
(core/bsr/reference/), the closed forms and limits of §A2/§A4, with tolerances from how each number was made;
and the channel the SE steps through (core/bsr/channels.py)."""

import math

import numpy as np
import pytest
from scipy import interpolate, optimize

from seqphase.core.bsr import baselines, se
from seqphase.core.bsr.channels import BSRChannel, reduce_aspect
from seqphase.core.bsr.figures import published_rows
from seqphase.core.errors import ParameterError
from seqphase.core.parametric_curve import ParametricCurveError, decreasing
from seqphase.core.rectangular_rie import RectangularRIE
from seqphase.sweeps.families import reference

PUBLISHED = reference("bsr")  # the family's published data: file name -> columns

#: effect of the RIE table's interpolation on the MMSE: |table - exact| of mmse_den at the midpoints between nodes is
#: <= 1.5e-8 (rho = 0.2, beta = 1; 1e-9 at rho = 0.5; docs/validation/bsr.md), and an error dm moves the fixed point's MMSE by
#: dm alpha / (alpha - mmse_den'(zeta)), a factor ~1-3 at these points (alpha(zeta) decreasing means
#: mmse_den' < alpha); 1.5e-7 leaves a further factor 3 for the development versions of the RIE module
TABLE_ERROR = 1.5e-7

# spec §8b: (alpha, beta, rho, delta, MMSE printed to 7 decimals)
TARGETS = [(0.5, 1.0, 0.5, 0.0, 0.3514552), (0.5, 1.0, 1.0, 0.0, 0.4556640), (0.2, 1.0, 0.2, 0.1, 0.7216786),
           (0.5, 1.0, 0.2, 0.5, 0.5099198)]


@pytest.mark.parametrize("alpha, beta, rho, delta, value", TARGETS)
def test_spec_regression_targets(alpha, beta, rho, delta, value):
    """Half a unit of the 7th decimal (5e-8) plus the table's interpolation error."""
    state = se.bo_state(alpha, rho, beta, delta)
    assert abs(state.mmse - value) < 5e-8 + TABLE_ERROR
    # the two forms of (A.1): MMSE = alpha zeta - delta = mmse_den(zeta)
    assert abs(state.mmse - float(se.denoising_mmse(rho, beta)(np.array([state.zeta]))[0])) < 1e-12


def test_spec_fifth_target_is_off_the_authors_own_curve():
    """§8b's fifth row, (alpha, rho, delta) = (1, 0.2, 0.5) at beta = 1, prints 0.2399637; ours is 0.2399798. The
    authors' noiseless rho = 0.2 file settles it without our RIE: each row (alpha_i, m_i) is a point
    mmse_den(zeta_i) = m_i at zeta_i = m_i / alpha_i, so a spline through the rows near zeta = 0.74 and the root of
    alpha zeta = delta + m(zeta) give the same number from the authors' data. Tolerance: the spline's error on a
    zeta spacing ~0.09 (2e-6; the same construction reproduces the fourth row, alpha = 0.5, to 1e-8) plus the
    file's own convergence (~1e-7)."""
    rows = published_rows(PUBLISHED["Fig1_delta_0.0_beta_1.0_rho_0.1-0.2-0.5-1.0-2.0_alpha_0.0_0.005_1.0.csv"], 0.2)
    keep = (rows["alpha"] > 0.2) & (rows["alpha"] < 0.355)
    zeta = rows["mmse"][keep] / rows["alpha"][keep]
    order = np.argsort(zeta)
    m = interpolate.CubicSpline(zeta[order], rows["mmse"][keep][order])
    for alpha in (1.0, 0.5):
        root = optimize.brentq(lambda z: alpha * z - 0.5 - m(z), zeta.min(), zeta.max())
        from_file = alpha * root - 0.5
        assert abs(se.bo_state(alpha, 0.2, 1.0, 0.5).mmse - from_file) < 2e-6
    assert abs(se.bo_state(1.0, 0.2, 1.0, 0.5).mmse - 0.2399637) > 1e-5  # the spec's printed value is off


#: the published beta = 1 noiseless files and the rho of each run by default (the others: -m slow)
FILES = [("Fig1_delta_0.0_beta_1.0_rho_0.1-0.2-0.5-1.0-2.0_alpha_0.0_0.005_1.0.csv", "alpha"),
         ("Fig1_LR_delta_0.0_beta_1.0_rho_0.1-0.2-0.5-1.0-2.0_alphaLR_0.0_0.005_1.0.csv", "alpha"),
         ("Fig1_delta_0.0_beta_1.0_rho_0.05_alpha_0.0_0.005_1.0.csv", "alpha"),
         ("Fig1_delta_0.0_beta_1.0_rho_0.05_alpha_0.0_0.001_1.0.csv", "alpha"),
         ("Fig1_LR_delta_0.0_beta_1.0_rho_0.0-0.05_alphaLR_0.0_0.001_1.0.csv", "alpha")]
DEFAULT_RHOS = (0.2, 0.5, 1.0)


def _file_cases():
    cases = []
    for name, _ in FILES:
        for rho in np.unique(PUBLISHED[name]["rho"]):
            if rho == 0.0:
                continue  # the rank-O(1) rows: test_low_rank_rows_of_the_published_file
            marks = () if rho in DEFAULT_RHOS else (pytest.mark.slow,)
            cases.append(pytest.param(name, float(rho), marks=marks, id=f"{name[:12]}-rho{rho:g}"))
    return cases


def compare_with_file(name, rho):
    """(alpha, file, ours, exception kind) per row of one rho of a published beta = 1 file."""
    rows = published_rows(PUBLISHED[name], rho)
    alpha, ref = rows["alpha"], rows["mmse"]
    ours = se.bo_mmse(alpha, rho, 1.0)
    pr = se.alpha_pr(rho, 1.0)
    kind = np.full(alpha.shape, "", dtype=object)
    kind[np.isclose(alpha, pr, rtol=0, atol=1e-9)] = "alpha_pr"
    kind[np.isclose(alpha, 0.001, rtol=0, atol=1e-12)] = "first_row"
    return alpha, ref, ours, kind


@pytest.mark.parametrize("name, rho", _file_cases())
def test_published_beta_one_curves(name, rho):
    """Every row within the spec's 1e-5 (§8b; the files are converged to ~1e-8-1e-6: their quadgk at default
    tolerance), except the two documented kinds of unconverged rows:
    * alpha = alpha_PR exactly: the authors solve there and keep the fixed point's residual (<= 1.5e-4, spec
      §A2/§A5); ours is 0 (perfect recovery), and the row before is within 1e-5 like any other;
    * alpha = 0.001 (rho = 0.05 files, and the rho = 0.1 row of the alpha_bar file): 0.99991 where the converged
      value is 0.99900 (spec §6.1 "known glitch"); ours equals 1 - alpha to O(alpha^2) (mmse_den = 1 - 1/zeta
      + O(zeta^-2)).
    * isolated rows: a few rows of the rho = 0.05 files are 1.2e-5 to 4.2e-5 off while both their neighbours agree
      with ours to < 6e-7 (alpha = 0.033 in the 0.001 file; alpha = 0.0023, 0.0178, 0.033, 0.0353 in the alpha_bar
      file). Two solutions of the same smooth equation cannot differ by 20-300x more at one grid point than at the
      next; a fixed point stopped early at one row can. We allow a row above 1e-5 only if it is such a spike (both
      neighbours < 1e-6), below 1e-4, and at most 4 per curve.
    Plus a median within 1e-6 (measured medians are <= 1.5e-7)."""
    alpha, ref, ours, kind = compare_with_file(name, rho)
    regular = kind == ""
    dev = np.abs(ours - ref)
    spikes = [i for i in np.flatnonzero(regular & (dev >= 1e-5))
              if 0 < i < len(dev) - 1 and max(dev[i - 1], dev[i + 1]) < 1e-6 and dev[i] < 1e-4]
    assert len(spikes) <= 4
    regular[spikes] = False
    assert np.all(dev[regular] < 1e-5), (alpha[regular][np.argmax(dev[regular])], np.max(dev[regular]))
    assert np.median(dev[kind == ""]) < 1e-6
    at_pr = kind == "alpha_pr"
    assert np.all(ours[at_pr] == 0.0) and np.all((ref[at_pr] >= 0) & (ref[at_pr] < 1.5e-4))
    first = kind == "first_row"
    assert np.all(np.abs(ours[first] - (1.0 - alpha[first])) < 2 * alpha[first] ** 2)


def test_low_rank_rows_of_the_published_file():
    """The rho = 0 rows of the alpha_bar file are the rank-O(1) curve, computed by the authors' damped iteration
    from the uninformed start, which slows down critically as alpha_bar -> 1 (h -> inf): the file sits above the
    exact 4 abar (1 - abar) by 4e-11 at abar = 0.501, growing to 1e-7 at 0.917, 1e-5 at 0.983 and 0.0079 at
    abar = 1 (measured). So: within the spec's 1e-5 below abar = 0.98, never below ours (an iteration from error 1
    approaches from above), and equal to rounding where the error is 1 (abar <= 1/2)."""
    rows = published_rows(PUBLISHED["Fig1_LR_delta_0.0_beta_1.0_rho_0.0-0.05_alphaLR_0.0_0.001_1.0.csv"], 0.0)
    abar, ref = rows["alpha_LR"], rows["mmse"]
    ours = se.low_rank_mse(abar, 1.0)
    assert np.max(np.abs(ours - ref)[abar < 0.98]) < 1e-5
    assert np.all(ref - ours >= -1e-15)
    assert np.max(np.abs(ours - ref)[abar <= 0.5]) < 1e-15 and np.median(np.abs(ours - ref)) < 1e-8


def test_low_rank_closed_forms_and_weak_recovery():
    """beta = 1, delta = 0: 1 on [0, 1/2], 4 abar (1 - abar) on [1/2, 1], 0 beyond (spec §A2). The weak-recovery
    threshold (1 + delta) sqrt(beta)/(1 + beta) is where the error leaves 1: on the authors' grid (step 1e-3) the
    first point with error < 1 is 0.501 (beta = 1), as in their data, and 0.551 (beta = 1, delta = 0.1; their data
    give 0.552: the error at 0.551 is 1 - 3.3e-6, below what their iteration resolves). beta -> inf at fixed abar:
    1 - q of the spec, the ridge formula in abar (convergence like 1/sqrt(beta): 1e-4 at beta = 1e8)."""
    abar = np.linspace(0, 1.5, 1501)
    closed = np.where(abar <= 0.5, 1.0, np.where(abar >= 1, 0.0, 4 * abar * (1 - abar)))
    assert np.max(np.abs(se.low_rank_mse(abar, 1.0) - closed)) < 1e-13
    grid = np.round(np.arange(0, 1.001, 0.001), 3)
    for beta, delta, first in [(1.0, 0.0, 0.501), (1.0, 0.1, 0.551)]:
        assert grid[np.argmax(se.low_rank_mse(grid, beta, delta) < 1)] == first
        assert se.low_rank_weak_threshold(beta, delta) == pytest.approx((1 + delta) / 2)
    for delta in (0.0, 0.3):
        abar = np.array([0.3, 0.7, 1.2, 2.0])
        assert np.max(np.abs(se.low_rank_mse(abar, 1e8, delta) - se.large_beta_low_rank_mse(abar, delta))) < 1e-4
    assert np.allclose(se.large_beta_low_rank_mse(abar, 0.2), baselines.mse_ridge(abar, 0.2), atol=1e-15)


@pytest.mark.parametrize("beta, delta", [(1.0, 0.0), (2.0, 0.1), (0.3, 0.5)])
def test_low_rank_solution_is_the_authors_iteration(beta, delta):
    """Bisection on h against the authors' damped iteration (h <- abar/(delta + 1 - g_a g_b), damping 0.5), and
    h (delta + 1 - g_a g_b) increasing in h (one fixed point above h_c)."""
    h_c = math.sqrt(beta) / (1 + beta)
    h = np.geomspace(h_c, 1e11, 4000)
    assert np.all(np.diff(h * (delta + se._low_rank_error(h, beta))) > 0)
    for abar in (0.3, 0.6, 0.8, 0.95):
        mse, _, converged = se.iterate_low_rank(abar, beta, delta)
        assert converged and abs(mse - float(se.low_rank_mse(abar, beta, delta))) < 1e-9


@pytest.mark.parametrize("rho", [0.2, 0.5, 1.0, 3.0])
def test_large_beta(rho):
    """beta = inf: the solve of alpha zeta = mmse_inf(zeta) is the closed form (1 - alpha)(1 - alpha/rho) below
    min(rho, 1) to the bisection's precision; the stable mmse_inf equals the spec's raw formula where that one
    does not cancel (zeta in [1e-2, 1e2]); with noise, MMSE = alpha zeta - delta solves the equation."""
    alpha = np.linspace(0, 1.2, 121)
    assert np.max(np.abs(se.large_beta_mmse(alpha, rho) - se.large_beta_noiseless_mmse(alpha, rho))) < 1e-12
    zeta = np.geomspace(1e-2, 1e2, 41)
    raw = zeta - zeta / 2 * (np.sqrt(1 + rho * ((zeta + 2) * rho * zeta + 2 * zeta + rho - 2)) - (rho - 1) - zeta * rho)
    assert np.max(np.abs(se.large_beta_denoising_mmse(zeta, rho) - raw)) < 1e-11
    noisy = se.large_beta_mmse(np.array([0.3, 0.8]), rho, 0.2)
    zeta = (noisy + 0.2) / np.array([0.3, 0.8])
    assert np.max(np.abs(noisy - se.large_beta_denoising_mmse(zeta, rho))) < 1e-12


def test_large_beta_is_the_limit_of_finite_beta():
    """mmse_den(zeta; beta) -> mmse_inf(zeta) like 1/beta (spec pitfall 6: "roughly O(1/beta)"; spec §A2: <= 4e-4 at
    beta = 1e4). Measured beta x gap at zeta = (0.1, 0.5, 2): 0.029, 0.195, 1.06 at beta = 1e3 and 1e4 alike; we ask
    the spec's 4e-4 at beta = 1e4 and beta x gap constant to 2% between 1e3 and 1e4 (the O(1/beta^2) remainder)."""
    zeta = np.array([0.1, 0.5, 2.0])
    scaled = [beta * (RectangularRIE(0.5, beta).mmse(zeta) - se.large_beta_denoising_mmse(zeta, 0.5))
              for beta in (1e3, 1e4)]
    assert np.all(scaled[1] / 1e4 < 4e-4) and np.all(scaled[1] > 0)
    assert np.max(np.abs(scaled[0] / scaled[1] - 1)) < 0.02


def test_small_noise_slope_is_alpha_pr():
    """Spec §A5 check 1: mmse_den(zeta)/zeta -> alpha_PR as zeta -> 0, i.e. the noiseless curve alpha(zeta) starts
    at alpha_PR. The approach is like sqrt(zeta) at the hard edge rho = beta = 1, like zeta otherwise."""
    for rho, beta in [(0.2, 1.0), (0.5, 1.0), (0.2, 2.0), (1.0, 1.0)]:
        _, curve = se.CURVE.table(rho, beta, 0.0)
        assert abs(curve[0] - se.alpha_pr(rho, beta)) < 1e-6


def test_curve_monotonicity_check_raises():
    """A rise of alpha(zeta) beyond rounding (several fixed points) is an error, not one of the roots."""
    zeta = np.geomspace(1e-3, 1e3, 7)
    alpha = np.array([1.0, 0.8, 0.6, 0.61, 0.4, 0.2, 0.1])
    with pytest.raises(ParametricCurveError, match="several fixed points"):
        decreasing(zeta, alpha, rtol=se.CURVE_RTOL, name="zeta", where="test")
    zeta2, curve = decreasing(zeta.copy(), np.array([1.0, 0.8, 0.6, 0.6 * (1 + 1e-12), 0.4, 0.2, 0.1]),
                              rtol=se.CURVE_RTOL, name="zeta", where="t")
    assert np.all(np.diff(curve) <= 0)


def test_edges_of_the_alpha_range():
    """alpha = 0 is the prior (1, zeta = inf); tiny alpha beyond the table (zeta > 1e4) gives 1 - alpha + O(alpha^2);
    noiseless alpha >= alpha_PR gives 0; noisy large alpha the linear asymptote zeta = delta/(alpha - alpha_PR)."""
    mmse, zeta = se.bo_mmse_zeta(np.array([0.0, 1e-5, 0.75, 0.9, 2.0]), 0.5, 1.0)
    assert mmse[0] == 1.0 and zeta[0] == math.inf
    assert abs(mmse[1] - (1 - 1e-5)) < 2e-10
    assert np.all(mmse[2:] == 0.0) and np.all(zeta[2:] == 0.0)
    state = se.bo_state(1e9, 0.5, 1.0, 0.1)
    assert state.zeta == pytest.approx(0.1 / (1e9 - 0.75), rel=1e-12)
    with pytest.raises(ParameterError, match="alpha"):
        se.bo_mmse(np.array([0.1, -0.2]), 0.5, 1.0)


def test_plain_iteration_agrees():
    """The plain SE iteration from the uninformed start reaches the curve's root (one fixed point)."""
    state = se.bo_state(0.3, 0.5, 1.0, 0.1)
    iterated, n_iter, converged = se.iterate_se(0.3, 0.5, 1.0, 0.1, tol=1e-12)
    assert converged and abs(iterated.mmse - state.mmse) < 1e-9


def test_short_sequences_are_the_transpose():
    """beta < 1 is handled by swapping d and L (spec §8.1; an open question of §9 item 3): the error at
    (rho, beta) is that at (rho/beta, 1/beta), and alpha_PR agrees with the swapped counting."""
    assert reduce_aspect(0.1, 0.5) == (0.2, 2.0)
    alpha = np.array([0.1, 0.3, 0.45])
    assert np.array_equal(se.bo_mmse(alpha, 0.1, 0.5), se.bo_mmse(alpha, 0.2, 2.0))
    assert se.alpha_pr(0.1, 0.5) == pytest.approx(se.alpha_pr(0.2, 2.0), rel=1e-14)


# -- ridge (the se method's `mse_ridge`) --------------------------------------------------------------------------


def test_ridge_closed_forms():
    """Spec §8b: 1 - alpha noiseless (alpha < 1, then 0), 0.82169906 at alpha = 0.2, delta = 0.1 (printed to 8
    decimals); the general-lambda formula equals the closed form at lambda = delta and is minimised there."""
    alpha = np.linspace(0, 2, 201)
    assert np.max(np.abs(baselines.mse_ridge(alpha, 0.0) - np.maximum(0, 1 - alpha))) < 1e-15
    assert abs(float(baselines.mse_ridge(0.2, 0.1)) - 0.82169906) < 5e-9
    for a, delta in [(0.2, 0.1), (0.5, 0.5), (1.5, 0.2), (3.0, 1.0)]:
        assert baselines.ridge_mse(a, delta, delta) == pytest.approx(float(baselines.mse_ridge(a, delta)), abs=1e-14)
        lams = delta * np.geomspace(0.2, 5.0, 401)
        values = baselines.ridge_mse(a, delta, lams)
        assert abs(lams[np.argmin(values)] / delta - 1) < 0.01  # grid step 0.8%
        assert np.all(values >= float(baselines.mse_ridge(a, delta)) - 1e-14)


@pytest.mark.parametrize("alpha, delta, lam", [(0.5, 0.1, 0.3), (1.5, 0.2, 0.05)])
def test_ridge_formula_against_simulation(alpha, delta, lam):
    """Ridge on vectorised Gaussian inputs at p = dL = 256, 16 seeds: the mean error within 4 standard errors plus
    a finite-p allowance 2/p (the O(1/p) bias of a resolvent trace; 0.008 at p = 256)."""
    p = 256
    n = int(alpha * p)
    errors = []
    for seed in np.random.SeedSequence(16).spawn(16):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((n, p))
        s = rng.standard_normal(p)
        y = X @ s / math.sqrt(p) + math.sqrt(delta) * rng.standard_normal(n)
        estimate = np.linalg.solve(X.T @ X / p + lam * np.eye(p), X.T @ y / math.sqrt(p))
        errors.append(np.mean((estimate - s) ** 2))
    sem = np.std(errors, ddof=1) / math.sqrt(len(errors))
    assert abs(np.mean(errors) - float(baselines.ridge_mse(alpha, delta, lam))) < 4 * sem + 2 / p


# -- the channel ----------------------------------------------------------------------------------------------------


def test_channel_measurement_and_step():
    """Labels are the channel on z = <X, S>/sqrt(dL); Var z = ||S||_F^2/(dL) (the cavity variance per unit of
    per-entry error, CAVITY_FACTOR = 1); the SE channel step is zeta = (delta + V)/alpha."""
    rng = np.random.default_rng(5)
    n, d, L, r = 4000, 6, 9, 2
    X = rng.standard_normal((n, d, L))
    S = rng.standard_normal((d, r)) @ rng.standard_normal((r, L)) / math.sqrt(r)
    z = BSRChannel.preactivation(X, S)
    assert np.allclose(z, np.einsum("ndl,dl->n", X, S) / math.sqrt(d * L), atol=1e-12)
    target = np.sum(S * S) / (d * L)
    assert abs(z.var() - target) < 5 * target * math.sqrt(2 / n)  # 5 standard errors of a Gaussian variance
    channel = BSRChannel(0.3)
    y = channel.labels(X, S, np.random.default_rng(1))
    assert np.allclose(y, channel.sample(z, np.random.default_rng(1)))
    assert channel.channel_step(0.4, 0.2) == pytest.approx((0.3 + 0.2) / 0.4, rel=1e-15)
    assert np.allclose(channel.channel_step(2.0, np.array([0.1, 0.5])), [0.2, 0.4], rtol=1e-15)


@pytest.mark.parametrize("call, field", [(lambda: BSRChannel(-0.1), "delta"),
                                         (lambda: se.bo_state(0.1, 0.0, 1.0), "rho"),
                                         (lambda: se.bo_state(0.1, 0.5, -2.0), "beta"),
                                         (lambda: se.bo_state(0.1, 0.5, 1.0, -1.0), "delta"),
                                         (lambda: se.bo_state(-0.1, 0.5, 1.0), "alpha")])
def test_bad_parameters_name_the_field(call, field):
    with pytest.raises(ParameterError) as info:
        call()
    assert info.value.field == field
