import numpy as np

from seqphase.core.numerics import gauss_hermite, gaussian_panels


def test_gauss_hermite_moments():
    x, w = gauss_hermite(20)
    assert abs(w.sum() - 1) < 1e-14
    # E xi^2 = 1, E xi^4 = 3, E xi^6 = 15: exact for degree < 40
    for k, val in ((2, 1.0), (4, 3.0), (6, 15.0), (3, 0.0)):
        assert abs(w @ x**k - val) < 1e-12
    assert gauss_hermite(20)[0] is x  # cached


def test_panels_moments_and_features():
    for feats in ((), ((0.0, 1e-6),), ((-3.0, 0.01), (2.0, 0.1)), ((-4.8e8, 1e-9),)):
        x, w = gaussian_panels(feats)
        assert abs(w.sum() - 1) < 1e-13
        assert abs(w @ x**2 - 1) < 1e-12 and abs(w @ x**4 - 3) < 1e-11
        assert len(x) < 3000


def test_panels_resolve_sharp_switch():
    # E[Phi((xi - c)/w)] = Phi(-c / sqrt(1 + w^2)): a switch of width w = 1e-4 at c = 1.3
    from scipy.special import ndtr
    c, w_ = 1.3, 1e-4
    x, w = gaussian_panels([(c, w_)])
    val = w @ ndtr((x - c) / w_)
    assert abs(val - ndtr(-c / np.sqrt(1 + w_**2))) < 1e-12
    # the plain base rule misses it badly: this is the lesson of spec §3.2
    x0, w0 = gaussian_panels()
    assert abs(w0 @ ndtr((x0 - c) / w_) - ndtr(-c)) > 1e-6


def _kernel_grid(sigma, lo=-20.0, hi=20.0, edges=()):
    """Panels of at most c sigma (c from `gaussian_kernel_rule(1e-12)`) over [lo, hi], split at `edges`, with
    that rule's Gauss-Legendre nodes: (z, weight of dz)."""
    from seqphase.core.numerics import gaussian_kernel_rule, unit_legendre

    reach, nodes, width = gaussian_kernel_rule(1e-12)
    cuts = np.unique(np.concatenate([np.arange(lo, hi, width * sigma), [hi], edges]))
    u, wu = unit_legendre(nodes)
    a, b = cuts[:-1, None], cuts[1:, None]
    return (a + (b - a) * u).ravel(), ((b - a) * wu).ravel(), reach


def _upper_moments(a):
    """int_a^inf t^k phi(t) dt, k = 0, 1, 2."""
    from scipy.special import ndtr

    phi = np.exp(-0.5 * a * a) / np.sqrt(2 * np.pi)
    return np.stack([ndtr(-a), phi, ndtr(-a) + a * phi])


def test_gaussian_window_sums_of_a_step_against_closed_forms():
    """P(z > 0.3) times t^k under N(omega, sigma^2), as nodes (the step an edge of the rule) and as a flat run
    [0.3, 20] in closed form: both within the kernel rule's tolerance 1e-12 of int_a^inf t^k phi, a =
    (0.3 - omega) / sigma (the nodes' Gaussian from a table, relative 3e-16, adds nothing visible)."""
    from seqphase.core.numerics import gaussian_window_sums

    omega = np.linspace(-3.0, 3.0, 61)
    for sigma in (1.0, 0.3, 1e-3):
        z, weight, reach = _kernel_grid(sigma, edges=[0.3])
        exact = _upper_moments((0.3 - omega) / sigma)
        by_nodes = gaussian_window_sums(omega, sigma, reach, z, weight, (z > 0.3).astype(float)[:, None])[:, 0]
        runs = (np.array([0.3]), np.array([20.0]), np.array([0]), np.array([1.0]))
        by_run = gaussian_window_sums(omega, sigma, reach, z, weight, np.zeros((z.size, 1)), runs)[:, 0]
        assert np.max(np.abs(by_nodes - exact)) < 1e-12
        assert np.max(np.abs(by_run - exact)) < 1e-13  # closed form: only the tails beyond the window
        whole = gaussian_window_sums(omega, sigma, reach, z, weight, np.ones((z.size, 1)))[:, 0]
        assert np.max(np.abs(whole - np.array([1.0, 0.0, 1.0])[:, None])) < 1e-12


def test_merged_panels_of_several_functions_resolve_each():
    """Probit likelihoods of both labels on one set of panels: fewer edges than each label's own panels
    united, and on them a 12-point rule integrates each label's P(y | z) over [-8, 8] within 1e-12 per unit
    length (the merge's tolerance) of its closed form z Phi(y z / s) + s phi(z / s) y."""
    from scipy.special import log_ndtr, ndtr

    from seqphase.core.numerics import merged_panels, resolve_panels, unit_legendre

    s = np.sqrt(0.1)
    functions = [lambda z, y=y: log_ndtr(y * z / s) for y in (-1.0, 1.0)]
    own = [resolve_panels(f, -8.0, 8.0) for f in functions]
    joint = merged_panels(functions, np.unique(np.concatenate(own)), tol=1e-12, nodes=12)
    apart = np.unique(np.concatenate([merged_panels(f, e, tol=1e-12, nodes=12) for f, e in zip(functions, own)]))
    assert joint.size < apart.size
    u, wu = unit_legendre(12)
    a, b = joint[:-1, None], joint[1:, None]
    z, w = (a + (b - a) * u).ravel(), ((b - a) * wu).ravel()
    for y, f in zip((-1.0, 1.0), functions):
        def primitive(x):
            return x * ndtr(y * x / s) + y * s * np.exp(-0.5 * (x / s) ** 2) / np.sqrt(2 * np.pi)
        assert abs(w @ np.exp(f(z)) - (primitive(8.0) - primitive(-8.0))) < 1e-12 * 16


def test_left_multiply_is_einsum_to_the_bit():
    """`numerics.left_multiply` replaces np.einsum("ab,nb...->na...") in the SMI SE's hot loop: the same
    bits (the sum in b order), for p = 2, 3 and one or two trailing axes."""
    from seqphase.core.numerics import left_multiply

    rng = np.random.default_rng(3)
    for p in (2, 3):
        A = rng.standard_normal((p, p))
        for shape in ((257, p, 2), (64, p, 2, 3)):
            x = rng.standard_normal(shape)
            assert np.array_equal(left_multiply(A, x), np.einsum("ab,nb...->na...", A, x))
