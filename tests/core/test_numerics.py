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
