"""Quadrature rules for Gaussian expectations E_{xi ~ N(0,1)}[f(xi)], shared by priors, channels and SE.

Two rules:

* ``gauss_hermite(n)``: probabilists' Gauss-Hermite, exact for polynomials of degree < 2n. Good for
  smooth integrands whose structure lives on the O(1) scale of the Gaussian.
* ``gaussian_panels(features)``: composite Gauss-Legendre on [-L, L] with the Gaussian density folded
  into the weights, refined around "features" (sharp transitions of known centre and width). This is
  the SNR-adaptive rule: at large SNR the integrands of SE switch over windows of width ~ 1/sqrt(mhat),
  which a fixed Gauss-Hermite rule under-resolves and turns into spurious fixed points (spec §3.2: a
  201-node GH rule gives a wrong compressed-sensing threshold 0.6985 instead of 0.6857).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

_SQRT_2PI = np.sqrt(2.0 * np.pi)
_XI_MAX = 38.5  # exp(-xi^2/2) < 1e-321 beyond: the Gaussian weight is exactly 0 in float64


@lru_cache(maxsize=64)
def _gauss_hermite_cached(n: int):
    x, w = np.polynomial.hermite_e.hermegauss(n)
    w = w / w.sum()  # normalise: weights of E over N(0, 1) sum to one exactly
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w


def gauss_hermite(n: int):
    """Probabilists' Gauss-Hermite rule: E_{xi~N(0,1)} f(xi) ~= sum_k w_k f(x_k), sum_k w_k = 1.

    Cached per n; the returned arrays are read-only.
    """
    return _gauss_hermite_cached(int(n))


@lru_cache(maxsize=16)
def _legendre(n: int):
    x, w = np.polynomial.legendre.leggauss(n)
    return x, w


def _panel_edges(features, half_width, base_width):
    """Sorted panel edges: a uniform base grid on [-L, L], refined grids around each feature, and
    base-width panels filling any gap between them (features in the far tail are reached this way
    without a uniform grid over a huge range)."""
    L = float(half_width)
    edges = [np.linspace(-L, L, max(2, int(np.ceil(2 * L / base_width))) + 1)]
    for c, w in features:
        c = float(c)
        w = float(w)
        if not (np.isfinite(c) and np.isfinite(w)) or w <= 0:
            continue
        if w >= base_width:  # feature no sharper than the base panels: nothing to refine
            continue
        # panels of width w/2 over +-3 widths, then growing geometrically (x1.5) up to the base
        # width, out to +-12 widths at least: the switch (tanh / sigmoid / erfc-like) is resolved to
        # ~1e-12 by 8 Legendre nodes per panel, at a cost logarithmic in base_width / w. Beyond
        # |xi| = 38.5 the N(0,1) density underflows, so nothing there can matter.
        offs = list(np.arange(0.0, 3.0 + 1e-9, 0.5))
        h, h_max = 0.5, base_width / w
        while offs[-1] < 12.0 or h < h_max:
            h = min(1.5 * h, h_max)
            offs.append(offs[-1] + h)
            if offs[-1] * w > 2 * _XI_MAX:
                break
        offs = np.asarray(offs) * w
        loc = np.concatenate((c - offs[::-1], c + offs[1:]))
        loc = loc[(loc > -_XI_MAX) & (loc < _XI_MAX)]
        if loc.size:
            edges.append(loc)
    e = np.unique(np.concatenate(edges))
    # drop slivers created by overlapping grids (they only cost nodes, never accuracy)
    e = e[np.concatenate(([True], np.diff(e) > 1e-14 * max(1.0, np.abs(e).max())))]
    gaps = np.diff(e)
    if gaps.max() > base_width * 1.0001:  # fill gaps between the base grid and far features
        parts = [np.linspace(a, b, int(np.ceil((b - a) / base_width)) + 1)[:-1]
                 for a, b in zip(e[:-1], e[1:])]
        e = np.concatenate(parts + [e[-1:]])
    return e


def gaussian_panels(features=(), half_width: float = 10.0, base_width: float = 0.5,
                    nodes_per_panel: int = 8):
    """Composite Gauss-Legendre rule for E_{xi~N(0,1)}[f(xi)] on [-L, L].

    Parameters
    ----------
    features : iterable of (centre, width)
        Sharp structures of f in the xi variable. Around each, panels of width ~ width/2 are laid over
        centre +- 3 widths, then graded geometrically up to the base width (so at least +- 12 widths are
        covered by refined panels; clipped to |xi| <= 38.5 where the density underflows). The range is
        extended to cover such features, with base-width panels bridging the gap, so a feature far
        in the tail is still resolved (its Gaussian weight may be small but not negligible in
        *relative* terms, e.g. for MMSEs near perfect recovery).
    half_width : L, the truncation of the Gaussian (mass outside +-10 is 1.5e-23).
    base_width : panel width of the base grid.
    nodes_per_panel : Gauss-Legendre nodes per panel.

    Returns
    -------
    nodes, weights : 1-d arrays; weights include the N(0,1) density (they sum to 1 up to truncation).
    """
    feats = tuple((float(c), float(w)) for c, w in features)
    return _panels_cached(feats, float(half_width), float(base_width), int(nodes_per_panel))


@lru_cache(maxsize=256)
def _panels_cached(feats, half_width, base_width, nodes_per_panel):
    edges = _panel_edges(feats, half_width, base_width)
    x, w = _legendre(nodes_per_panel)
    a, b = edges[:-1, None], edges[1:, None]
    half = (b - a) / 2
    nodes = ((a + b) / 2 + half * x[None, :]).ravel()
    weights = (half * w[None, :]).ravel() * np.exp(-0.5 * nodes**2) / _SQRT_2PI
    nodes.setflags(write=False)
    weights.setflags(write=False)
    return nodes, weights
