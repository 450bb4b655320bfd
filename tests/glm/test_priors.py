import math

import numpy as np
import pytest
from scipy import integrate

from seqphase.core.glm.priors import GaussBernoulliPrior, GaussianPrior, RademacherPrior


def test_denoise_is_gradient_of_log_partition(prior):
    rng = np.random.default_rng(1)
    B = rng.normal(0, 3, 50)
    A = rng.uniform(0.01, 20, 50)
    mean, var = prior.denoise(B, A)
    h = 1e-5
    fd_mean = (prior.log_partition(B + h, A) - prior.log_partition(B - h, A)) / (2 * h)
    fd_var = (prior.denoise(B + h, A)[0] - prior.denoise(B - h, A)[0]) / (2 * h)
    np.testing.assert_allclose(mean, fd_mean, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(var, fd_var, rtol=1e-6, atol=1e-9)
    # batch == per element
    for i in (0, 7, 31):
        mi, vi = prior.denoise(B[i], A[i])
        assert mi == pytest.approx(mean[i], rel=1e-14, abs=1e-300)
        assert vi == pytest.approx(var[i], rel=1e-14, abs=1e-300)


def test_prior_edges_finite(prior):
    B = np.array([-1e8, -1e3, -50, 0, 50, 1e3, 1e8])
    for A in (0.0, 1e-12, 1.0, 1e6, 1e12):
        mean, var = prior.denoise(B, A)
        lz = prior.log_partition(B, A)
        assert np.all(np.isfinite(mean)) and np.all(np.isfinite(var)) and np.all(np.isfinite(lz))
        assert np.all(var >= 0)


def test_sample_second_moment(prior):
    x = prior.sample(200_000, np.random.default_rng(2))
    # 4 standard errors of the mean of x^2 (Var x^2 <= 3 rho for these priors)
    assert abs(np.mean(x**2) - prior.rho) < 4 * math.sqrt(3 * prior.rho / x.size)


def test_mmse_is_expected_variance_and_inverse(prior):
    for mhat in (1e-3, 0.3, 3.0, 30.0):
        v = prior.mmse(mhat)
        assert 0 < v < prior.rho
        assert prior.mhat_for_mmse(v) == pytest.approx(mhat, rel=1e-8)
    # Bayes-optimal identity: mmse = rho - E[x0 f_in], checked where no cancellation occurs.
    # mmse(mhat) is decreasing and d psi/d mhat = (rho - mmse)/2 (I-MMSE).
    h = 1e-4
    for mhat in (0.5, 2.0):
        dpsi = (prior.free_entropy(mhat + h) - prior.free_entropy(mhat - h)) / (2 * h)
        assert dpsi == pytest.approx((prior.rho - prior.mmse(mhat)) / 2, rel=1e-6)


def test_gaussian_closed_forms():
    p = GaussianPrior()
    for mhat in (1e-3, 1.0, 1e6):
        assert p.mmse(mhat) == pytest.approx(1 / (1 + mhat), rel=1e-14)


def test_rademacher_mmse_relative_accuracy_when_tiny():
    p = RademacherPrior()
    for mhat in (10.0, 100.0, 1000.0):
        s = math.sqrt(mhat)
        f = lambda t: (1 / math.cosh(mhat + s * t) ** 2 if abs(mhat + s * t) < 300 else 0.0) \
            * math.exp(-t * t / 2) / math.sqrt(2 * math.pi)
        ref = integrate.quad(f, -s - 40 / s, -s + 40 / s, points=[-s], epsabs=0, epsrel=1e-12,
                             limit=500)[0] + integrate.quad(f, -s + 40 / s, 40, epsabs=0,
                                                            epsrel=1e-12, limit=500)[0]
        assert p.mmse(mhat) == pytest.approx(ref, rel=1e-9)
    assert p.mmse(1000.0) < 1e-200  # relative accuracy down to underflow, no cancellation


def _gb_reference(prior, mhat, fun):
    """quad over each mixture component of B's marginal, with breakpoints at the posterior switch."""
    rho, A = prior.rho, mhat
    arg = math.log((1 - rho) / rho) + 0.5 * math.log1p(A)
    tot = 0.0
    for wt, s in ((1 - rho, math.sqrt(mhat)), (rho, math.sqrt(mhat * (1 + mhat)))):
        pts = [0.0]
        if arg > 0:
            b = math.sqrt(2 * (1 + A) * arg)
            wb = (1 + A) / b
            pts += [sg * (b + k * wb) for sg in (1, -1) for k in (-6, -3, -1, 0, 1, 3, 6)]
        lim = 14 * s
        pts += list(np.linspace(-lim, lim, 57))  # keep quad's subintervals on the Gaussian scale
        pts = sorted(p for p in set(pts) if -lim < p < lim)
        dens = lambda B: math.exp(-B * B / (2 * s * s)) / (math.sqrt(2 * math.pi) * s)
        edges = [-lim] + pts + [lim]
        tot += wt * sum(integrate.quad(lambda B: dens(B) * float(fun(B)), a, b, epsabs=0,
                                       epsrel=1e-12, limit=500)[0]
                        for a, b in zip(edges[:-1], edges[1:]))
    return tot


@pytest.mark.parametrize("rho", [0.5, 0.25, 0.05])
@pytest.mark.parametrize("mhat", [1e-3, 1e-1, 1.0, 10.0, 1e3, 1e6])
def test_gauss_bernoulli_against_quad(rho, mhat):
    # The SNR-adaptive panels must match adaptive quad to ~1e-7 relative over 9 decades of mhat.
    p = GaussBernoulliPrior(rho)
    ref_mmse = _gb_reference(p, mhat, lambda B: p.denoise(B, mhat)[1])
    ref_fe = _gb_reference(p, mhat, lambda B: p.log_partition(B, mhat))
    assert p.mmse(mhat) == pytest.approx(ref_mmse, rel=1e-7)
    assert p.free_entropy(mhat) == pytest.approx(ref_fe, rel=1e-7, abs=1e-14)
