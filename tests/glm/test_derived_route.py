"""The derived route (core/plugins.py `DerivedScalarChannel`, core/glm/priors.py `DerivedPrior`) on every
shape of likelihood the contract admits, against computations written here independently of it.

The independent computations use nothing of the route: plain trapezoid sums on fine uniform grids (for an
integrand analytic in a strip of half-width d around the real axis, the trapezoid rule with spacing h errs
by ~exp(-2 pi d / h): spectral, and far below every tolerance here), and closed forms where the channel has
them. The SE is checked at the route's own fixed point V*: the independent mhat there against the route's,
and the fixed-point equation V* = mmse(mhat(V*)) with the independent mhat. An error e in mhat moves the
fixed point by at most e |dmmse/dmhat| / (1 - slope); the checks below bound e itself, so no SE slope
enters the tolerances.

Tolerances, from the route's stated accuracies: a discrete label's Z_out-weighted moments within
kernel_tol + 2 flat_tol (~1e-12) absolute, a continuous y's normalisation within y_tol (1e-9), the
SE iteration's own tol (1e-10) on V. mhat is a sum of O(1) weighted terms of size ~ 1 / V: held to
1e-8 relative (a factor >= 10 above the sum of those). The fixed-point residual with the independent mhat
is held to 1e-8 (the SE's tol plus the mhat error times dmmse/dmhat <= 1).
"""

import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from scipy import special

import seqphase
import userplugins
from seqphase.core import plugins
from seqphase.core.channel import AbsChannel, LinearChannel, SignChannel
from seqphase.core.glm import se
from seqphase.core.glm.priors import DerivedPrior, GaussBernoulliPrior, GaussianPrior, RademacherPrior

T = np.linspace(-12.0, 12.0, 6001)           # cavity t grid (trapezoid)
PHI_T = np.exp(-0.5 * T**2) / math.sqrt(2 * math.pi) * (T[1] - T[0])


def xi_rule(points):
    """The outer xi grid (trapezoid) and its weights."""
    xi = np.linspace(-12.0, 12.0, points)
    return xi, np.exp(-0.5 * xi**2) / math.sqrt(2 * math.pi) * (xi[1] - xi[0])


XI, PHI_XI = xi_rule(1601)


def independent_mhat_discrete(log_likelihood, labels, alpha, m, V, xi_points=1601, chunk=200):
    """alpha E_{xi, y}[g_out^2] by trapezoid sums: Z_out(y | omega, V) = sum_t phi(t) P(y | omega + sqrt V t),
    g_out = E[t | y] / sqrt V."""
    xi, phi_xi = xi_rule(xi_points)
    omega = math.sqrt(m) * xi
    total = 0.0
    for start in range(0, omega.size, chunk):
        om = omega[start:start + chunk, None]
        for label in labels:
            p = np.exp(log_likelihood(label, om + math.sqrt(V) * T[None, :]))
            z = p @ PHI_T
            first = (p * T) @ PHI_T
            g = np.where(z > 0, first / np.where(z > 0, z, 1.0), 0.0) / math.sqrt(V)
            total += float(phi_xi[start:start + chunk] @ (z * g * g))
    return alpha * total


def logistic_log_likelihood(beta):
    return lambda y, z: -np.logaddexp(0.0, -beta * y * z)


@pytest.mark.parametrize("beta", [0.25, 0.5, 1.0, 2.0, 4.0, 10.0])
def test_logistic_se_against_an_independent_computation(beta):
    """The logistic channel (smooth everywhere: no flat stretch) with a Gaussian prior, both SE starts, at
    alpha = 1, 2, 4: no failure, and the fixed point holds under the independent mhat."""
    prior = GaussianPrior()
    channel = plugins.DerivedScalarChannel(userplugins.Logistic(beta))
    for alpha in (1.0, 2.0, 4.0):
        branches = se.glm_se_branches(prior, channel, alpha)
        for state in (branches["amp"], branches["informed"]):
            assert state.converged
            V, m = state.mse, state.overlap
            mhat = independent_mhat_discrete(logistic_log_likelihood(beta), (-1.0, 1.0), alpha, m, V)
            assert abs(se.channel_mhat(channel, alpha, m, V) - mhat) < 1e-8 * mhat
            assert abs(V - prior.mmse(mhat)) < 1e-8


def relu_log_partition_and_g(y, omega, V, delta):
    """Closed forms of y = max(z, 0) + sqrt(delta) n: Z_out = N(y; 0, delta) Phi(-omega / sqrt V)
    + N(y; omega, V + delta) Phi(mu / s), with mu = (omega delta + y V) / (V + delta) and
    s^2 = V delta / (V + delta) the law of z given y on z > 0; g_out = d_omega log Z_out."""
    sv = math.sqrt(V)
    s = math.sqrt(V * delta / (V + delta))
    mu = (omega * delta + y * V) / (V + delta)
    a = np.exp(-0.5 * y * y / delta) / math.sqrt(2 * math.pi * delta)
    b = np.exp(-0.5 * (y - omega) ** 2 / (V + delta)) / math.sqrt(2 * math.pi * (V + delta))
    left, right = special.ndtr(-omega / sv), special.ndtr(mu / s)
    z = a * left + b * right
    z = np.where(z > 0, z, np.nan)  # far out in y: no mass, no g (the sums below skip these)
    dz = (-a * np.exp(-0.5 * omega**2 / V) / math.sqrt(2 * math.pi) / sv
          + b * ((y - omega) / (V + delta) * right
                 + np.exp(-0.5 * (mu / s) ** 2) / math.sqrt(2 * math.pi) * delta / (V + delta) / s))
    return np.log(z), dz / z


@pytest.mark.parametrize("delta", [0.05, 0.5])
def test_noisy_relu_against_its_closed_forms(delta):
    """A continuous y with a likelihood flat in z for z < 0: log Z_out and g_out of GAMP (per sample)
    against the closed forms, and the SE's mhat (the y rule and the kernel table) against a trapezoid sum
    over (xi, y) of the closed forms, at the route's fixed points of alpha = 0.5, 2."""
    channel = plugins.DerivedScalarChannel(userplugins.NoisyReLU(delta))
    rng = np.random.default_rng(4)
    for V in (0.01, 0.3, 1.0):
        omega = rng.standard_normal(64)
        y = channel.sample_scalar(omega + math.sqrt(V) * rng.standard_normal(64), rng)
        log_z, g = relu_log_partition_and_g(y, omega, V, delta)
        assert np.max(np.abs(channel.log_partition(y, omega, np.full(64, V)) - log_z)) < 1e-8
        assert np.max(np.abs(channel.g_out_scalar(y, omega, np.full(64, V))[0] - g) / (1 + np.abs(g))) < 1e-8
    prior = GaussianPrior()
    ys = np.linspace(-8.0, 20.0, 14001)
    for alpha in (0.5, 2.0):
        state = se.glm_se(prior, channel, alpha)
        assert state.converged
        m, V = state.overlap, state.mse
        total = 0.0
        for start in range(0, XI.size, 100):
            om = math.sqrt(m) * XI[start:start + 100, None]
            log_z, g = relu_log_partition_and_g(ys[None, :], om, V, delta)
            terms = np.nan_to_num(np.exp(log_z) * g * g)
            total += float(PHI_XI[start:start + 100] @ (terms @ np.full(ys.size, ys[1] - ys[0])))
        mhat = alpha * total
        assert abs(se.channel_mhat(channel, alpha, m, V) - mhat) < 1e-8 * mhat
        assert abs(V - prior.mmse(mhat)) < 1e-8


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0, 4.0])
def test_gaussian_output_as_a_user_channel_is_the_linear_channel(alpha):
    """y = z + sqrt(delta) n written as a Likelihood (labels = None) against the shipped linear channel's
    closed forms: overlap, free entropy and test error (the y rule within 1e-9, see the module doc)."""
    prior = GaussianPrior()
    user = plugins.DerivedScalarChannel(userplugins.GaussianNoise(0.5))
    derived, closed = se.glm_se(prior, user, alpha), se.glm_se(prior, LinearChannel(0.5), alpha)
    for name in ("overlap", "free_entropy", "gen_error"):
        assert abs(getattr(derived, name) - getattr(closed, name)) < 1e-8, name


# -- the shipped channels and priors with their closed forms switched off --------------------------------

_PAIRS = [
    ("gaussian", GaussianPrior(), "sign", SignChannel(), (0.5, 2.0), (1.0, 5.0)),
    ("rademacher", RademacherPrior(), "sign", SignChannel(), (0.5, 1.3), (1.2, 1.6)),
    ("gauss-bernoulli", GaussBernoulliPrior(0.3), "linear", LinearChannel(0.01), (0.3,), (1.0,)),
    ("gaussian", GaussianPrior(), "linear", LinearChannel(0.5), (0.5, 2.0), ()),
]
# every pair at its first alphas in the default run, at the rest of its grid in the slow one
SHIPPED_PAIRS = [pytest.param(p, prior, c, channel, alphas, id=f"{p}-{c}")
                 for p, prior, c, channel, alphas, _ in _PAIRS] + [
    pytest.param(p, prior, c, channel, rest, id=f"{p}-{c}-rest", marks=pytest.mark.slow)
    for p, prior, c, channel, _, rest in _PAIRS if rest]


def _fixed_point_error(state):
    """A bound on |V - V*| of an SE run stopped at residual r_n with contraction rate lambda (the ratio of
    its last residuals): r_n lambda / (1 - lambda); the SE's tol where it converged in one step."""
    r = state.residuals[np.isfinite(state.residuals) & (state.residuals > 0)]
    if r.size < 3:
        return 1e-10
    rate = min(float(r[-1] / r[-2]), 0.99)
    return float(r[-1] * rate / (1.0 - rate)) + 1e-12


@pytest.mark.parametrize("prior_name, shipped_prior, channel_name, shipped_channel, alphas", SHIPPED_PAIRS)
def test_shipped_closed_forms_against_the_derived_route(prior_name, shipped_prior, channel_name, shipped_channel,
                                                        alphas):
    """Every shipped glm channel with a finite likelihood, with every shipped prior: the SE of both branches
    with the closed forms and with everything derived (the setting derived = true). The two runs stop at
    their own residuals: the fixed points may differ by each run's bound (`_fixed_point_error`), plus the
    quadratures' (1e-10 on V); free entropy and test error are held to 1e-8."""
    derived_prior, derived_channel = DerivedPrior(shipped_prior), plugins.DerivedScalarChannel(shipped_channel)
    for alpha in alphas:
        a = se.glm_se_branches(shipped_prior, shipped_channel, alpha)
        b = se.glm_se_branches(derived_prior, derived_channel, alpha)
        for branch in ("amp", "informed"):
            x, y = a[branch], b[branch]
            bound = _fixed_point_error(x) + _fixed_point_error(y) + 1e-10
            assert abs(x.mse - y.mse) < bound, (alpha, branch, x.mse, y.mse, bound)
            assert abs(x.free_entropy - y.free_entropy) < 1e-8
            assert abs(x.gen_error - y.gen_error) < 1e-8


@pytest.mark.parametrize("noiseless", [pytest.param(AbsChannel(), id="abs"),
                                       pytest.param(LinearChannel(0.0), id="linear", marks=pytest.mark.slow)])
def test_a_noiseless_channel_is_approached_by_its_noisy_form(noiseless):
    """y = f(z) has no finite likelihood: the route refuses it, and its noisy form y = f(z) + sqrt(delta) n,
    derived, approaches the closed-form SE of the noiseless channel as delta -> 0 (the gap shrinks at least
    3x per decade of delta, and ends below 1e-2). z^2 shares |z|'s kernel; its approach, whose y rule spans
    y up to y_reach^2, is measured in benchmarks/derived_route.py."""
    with pytest.raises(seqphase.core.errors.ParameterError, match="noiseless"):
        plugins.DerivedScalarChannel(noiseless)
    prior = GaussBernoulliPrior(0.5) if isinstance(noiseless, LinearChannel) else GaussianPrior()
    alpha = 0.8 if isinstance(noiseless, LinearChannel) else 1.6
    target = se.glm_se(prior, noiseless, alpha).overlap
    gaps = []
    for delta in (1e-1, 1e-2, 1e-3):
        noisy = plugins.DerivedScalarChannel(noiseless.noisy(delta))
        gaps.append(abs(se.glm_se(prior, noisy, alpha).overlap - target))
    assert gaps[1] < gaps[0] / 3 and gaps[2] < gaps[1] / 3 and gaps[2] < 1e-2, gaps


# -- likelihoods of every shape, generated ----------------------------------------------------------------


class Generated(seqphase.Likelihood):
    """P(y = 1 | z) = floor + (1 - 2 floor) * S(z) with S a product of logistic steps (beta = inf: a hard
    step) and a ridge, clipped to [clip_lo, clip_hi] (flat tails); y in {-1, +1}."""

    labels = (-1.0, 1.0)

    def __init__(self, floor, betas, centres, ridge_height, ridge_width, clip_lo, clip_hi):
        self.floor, self.betas, self.centres = floor, tuple(betas), tuple(centres)
        self.ridge_height, self.ridge_width, self.clip_lo, self.clip_hi = ridge_height, ridge_width, clip_lo, clip_hi

    def __repr__(self):
        return (f"Generated({self.floor}, {self.betas}, {self.centres}, {self.ridge_height}, {self.ridge_width}, "
                f"{self.clip_lo}, {self.clip_hi})")

    def probability(self, z):
        z = np.clip(np.asarray(z, float), self.clip_lo, self.clip_hi)
        s = np.ones_like(z)
        for beta, centre in zip(self.betas, self.centres):
            s = s * (np.where(z >= centre, 1.0, 0.0) if math.isinf(beta) else special.expit(beta * (z - centre)))
        s = s * (1 - self.ridge_height) + self.ridge_height * np.exp(-0.5 * (z / self.ridge_width) ** 2)
        return self.floor + (1 - 2 * self.floor) * s

    def log_likelihood(self, y, z):
        p = self.probability(z)
        with np.errstate(divide="ignore"):
            return np.where(np.asarray(y) > 0, np.log(p), np.log1p(-p))

    def sample(self, z, rng):
        return np.where(rng.random(np.shape(z)) < self.probability(z), 1.0, -1.0)


likelihoods = st.builds(
    Generated,
    floor=st.sampled_from([0.0, 1e-3, 0.1]),
    betas=st.lists(st.sampled_from([0.3, 1.0, 5.0, 40.0, math.inf]), min_size=1, max_size=2),
    centres=st.lists(st.floats(-1.5, 1.5), min_size=2, max_size=2),
    ridge_height=st.sampled_from([0.0, 0.5]),
    ridge_width=st.sampled_from([0.05, 0.5]),
    clip_lo=st.sampled_from([-math.inf, -1.0]),
    clip_hi=st.sampled_from([math.inf, 0.8]),
)


@pytest.mark.fuzz
@settings(max_examples=int(os.environ.get("SEQPHASE_FUZZ_EXAMPLES", 12)), deadline=None, database=None,
          derandomize="SEQPHASE_FUZZ_EXAMPLES" not in os.environ, suppress_health_check=[HealthCheck.too_slow])
@given(likelihood=likelihoods, alpha=st.sampled_from([0.5, 2.0]), V=st.sampled_from([1e-6, 0.05, 0.9]))
@example(likelihood=Generated(0.0, (1.0,), (0.0, 0.0), 0.0, 0.5, -math.inf, math.inf), alpha=2.0, V=0.9)
@example(likelihood=Generated(0.0, (math.inf,), (0.3, 0.0), 0.0, 0.5, -1.0, 0.8), alpha=0.5, V=1e-6)
def test_generated_likelihoods_against_an_independent_mhat(likelihood, alpha, V):
    """Smooth, stepped, flat-tailed and ridged likelihoods, at small and large cavity variances (12 examples,
    the same every run; SEQPHASE_FUZZ_EXAMPLES=N runs N, new ones each run): the SE's
    mhat at m = 1 - V (a Gaussian prior) is finite and within 1e-8 relative (+ 1e-10 absolute, a channel
    that carries almost no information) of the trapezoid sums; and the SE runs to a finite fixed point.
    The trapezoid sums (xi spacing 7.5e-3, t spacing 4e-3) resolve a hard step only to ~ the spacing times
    its jump, and a ridge or transition only where several spacings span it: a stepped or clipped
    likelihood, or one narrower than 8 spacings in t or in xi, is checked for finiteness only."""
    channel = plugins.DerivedScalarChannel(likelihood)
    m = 1.0 - V
    derived = se.channel_mhat(channel, alpha, m, V)
    assert math.isfinite(derived) and derived >= 0
    xi_step = 24.0 / 3200
    widths = [1.0 / beta for beta in likelihood.betas] + ([likelihood.ridge_width] if likelihood.ridge_height else [])
    smooth = all(math.isfinite(beta) for beta in likelihood.betas) and \
        math.isinf(likelihood.clip_lo) and math.isinf(likelihood.clip_hi) and \
        all(w / math.sqrt(V) > 8 * (T[1] - T[0]) and w > 8 * xi_step for w in widths)
    if smooth:
        independent = independent_mhat_discrete(likelihood.log_likelihood, (-1.0, 1.0), alpha, m, V, xi_points=3201)
        assert abs(derived - independent) < 1e-8 * independent + 1e-10
    state = se.glm_se(GaussianPrior(), channel, alpha, max_iter=400)
    assert math.isfinite(state.overlap) and math.isfinite(state.free_entropy) and math.isfinite(state.gen_error)
