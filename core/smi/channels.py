"""The tied-attention output channel: g_out and its token-diagonal Jacobian, shared by SE, GAMP and
the thresholds (spec smi.md §2).

Labels. The channel works with u (N, T) such that h_L = +-u (`link.u_from_ratios`): for T = 2 this is
a lossless encoding of the 2 x 2 attention matrix y (`label_of_y` / `labels_of_z`), computed from h's
log ratios directly so that no precision is lost to a rounded y.

Two shapes of the same evaluation:

* native (what SE, GAMP and the thresholds use): u (N, T), omega (N, p, T) (layers x tokens), V (p, p)
  shared by the tokens (the Gaussian prior is the same for every weight column, so GAMP's V = C_hat is
  one matrix too). `g_out_tokens(u, omega, V)` returns

      g     = V^-1 (<Z> - omega)                                    (N, p, T)
      dg[t] = V^-1 Cov(Z_:,t, Z_:,t) V^-1 - V^-1                    (N, T, p, p)

  and `posterior_covariance(u, omega, V)` the posterior mean and the full (p T) x (p T) covariance
  (index layer * T + token) that the thresholds' F map and K11 are made of.
* the protocol of `seqphase.core.channel.Channel` (tokens = T): the token axis folded into the batch,
  y = u.reshape(-1) (N T,), omega (N T, p) with the T rows of one sequence consecutive (omega_native
  (N, p, T) -> transpose (N, T, p) -> reshape), g (N T, p) and the token-diagonal dg (N T, p, p).
  `g_out` and `sample` only reshape around the native evaluation (same numbers).

The 2-layer posterior is the compiled adaptive grid of `posterior.py`; the 3-layer posterior (z1, z2 in
R^4, z3 eliminated) is the compiled mixture importance sampler of `posterior3.py` on a fixed scrambled
Sobol point set (`Resolution3`), so its map is deterministic too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqphase.core.channel import Channel
from seqphase.core.errors import ParameterError
from seqphase.core.numerics import left_multiply
from seqphase.core.smi import link
from seqphase.core.smi.posterior import RHO_MAX, posterior_2layer, strip_map
from seqphase.core.smi.posterior3 import posterior_3layer, sobol_normals
from seqphase.core.smi.posterior_z2 import posterior_2layer_z2


@dataclass(frozen=True)
class Resolution:
    """Grid settings of the posterior: level-0 points per axis, target effective number of cells, and
    the zoom depth. Measured against a dense grid: g_out within 0.5% for V22 >= 0.02 (tests/smi); against
    a grid twice as fine at V22 = 1e-3: median 1e-5, worst of 400 samples 2% (docs/validation/smi.md). Skips below
    ~0.4 use strip coordinates (`posterior.strip_map`) and the acceptance rule of `neff_strip`, `tol_strip`. A
    last-layer cavity narrow against the first layer's (V22 < z2_ratio V11, V22 < z2_max, V11 >= z2_v11_min) is
    integrated over z2 with `neff_z2` (`posterior_z2.py`; at V = diag(0.5, 1e-6): median 1e-7, worst 1.6e-3 of
    max |g|, tests/smi/test_smi_small_cavity.py)."""

    n0: int = 40
    neff: float = 30.0
    max_level: int = 6
    # small skips (strip coordinates, `posterior.strip_map`): with 30 (or 100) effective cells alone the grid
    # accepted under-resolved posteriors (c = 0.01, 30 model draws at Q = diag(0, 0.9): worst error of g or
    # dg 6% with 30, 2.4% with 100, 3e-4 with 300, against a 2000^2 grid; docs/validation/smi.md). 300 effective cells
    # (until commit b1eb086; neff_strip = 300, tol_strip = 0 restore it) were almost never reached by a
    # level-0 grid: 3-5 grids a sample. Now: 30 effective cells and the local error estimate of
    # `posterior._roughness_axes` <= tol_strip of the total weight (CHANGELOG.md, smi gamp version 3: 288 samples against the dense grid, the worst error of g per skip no larger than the
    # 300-cell rule's except at c = 0.1, 2.8e-4 against 1e-9; 4-7x fewer cells at c = 0.1)
    neff_strip: float = 30.0
    tol_strip: float = 1e-4
    # narrow last-layer cavity: V22 < z2_ratio V11, V22 < z2_max and V11 >= z2_v11_min integrate over z2
    # instead of z1 (`posterior_z2.py`; the z1 grid misses curved ridges there; with V11 small too, z1 is
    # pinned by its own prior and the z1 grid is right while the z2 chart is not; docs/validation/smi.md "Channel
    # accuracy"); z2_ratio = 0 turns the z2 chart off
    z2_ratio: float = 0.01
    z2_max: float = 1e-3
    z2_v11_min: float = 0.02
    neff_z2: float = 100.0
    # cells lighter than e^weight_floor of the grid's peak weigh 0 (`posterior._weigh`; -708: only those a
    # double cannot tell from 0 next to the peak, the same bits as no floor)
    weight_floor: float = -708.0
    # the level-0 cell of the strip axis t in units of the m cell (the error estimate and the refinement keep
    # answering for the accuracy; a coarser level 0 is refined more often)
    t_step: float = 1.0


#: the posterior grids a method can ask for by name: "fine" is the SE's (and the gamp method's); "coarse" is the
#: onset's default, whose errors stay below 2% of the posterior sd at c <= 0.1 on GAMP's own calls and whose
#: kernel costs 0.40-0.50 of "fine"'s there (docs/validation/smi.md, The onset's posterior grid)
RESOLUTIONS = {"fine": Resolution(), "coarse": Resolution(tol_strip=1e-2, weight_floor=-50.0, t_step=1.25)}


@dataclass(frozen=True)
class Resolution3:
    """Point set of the 3-layer importance sampler (`posterior3.py`): n_points scrambled Sobol points (each
    used with its mirror image and antithetic inner draws: ~24 n_points candidate evaluations per sample),
    their seed, the mixture weights of the inner proposal (cavity, diagonal band, inverted sheet) and the
    band width in units of v3|1^(1/4). The error is sampling noise (self-normalised weights: bias O(1 /
    n_points)), dominated by that of <z3> amplified by 1/V33. Measured at 1024 points on SE draws
    (docs/validation/smi.md): per-sample error of g in units of rms |g|, median 0.3% / 1.1% / 3.8% at
    Q = diag(0, 0, 0.95 / 0.99 / 0.999), 90th percentile 2% / 7% / 20%; it adds 0.03% / 0.25% / 1.5% to
    E[g g^T] (the SE's Qhat). Against brute-force Monte Carlo at 8192 points:
    g within 0.1%, log Z within 0.2% (tests/smi/test_smi3.py). The accuracy is insensitive to the
    mixture weights and band in 0.15-0.4 / 0.1-0.2 / 0.5-0.75 and 0.5-2 (measured)."""

    n_points: int = 1024
    seed: int = 20250202
    lam_prior: float = 0.25
    lam_band: float = 0.15
    lam_sheet: float = 0.6
    band: float = 1.0


class AttentionChannel(Channel):
    """Deep tied attention with T = 2 tokens, rank 1 per layer, skip c on the non-final layers. p = depth
    indices per token; `T` (= `tokens`) tokens per sequence. Even: y is unchanged when any one layer's
    index flips sign (Q = 0 is a fixed point of the SE)."""

    name = "attention"
    T = 2
    tokens = T
    even = True

    def __init__(self, depth=2, skip=1.0, resolution=None):
        if depth not in (2, 3):
            raise ParameterError("params.depth", f"the exact posterior is implemented for depth 2 and 3, got {depth}",
                                 "use depth = 2 or 3")
        if not skip > 0:
            raise ParameterError("params.skip", f"skip c = {skip!r} makes A(z1) singular at z1_0 = z1_1",
                                 "use skip > 0")
        self.depth = depth
        self.p = depth
        self.skip = float(skip)
        if resolution is None:
            resolution = Resolution() if depth == 2 else Resolution3()
        if not isinstance(resolution, Resolution if depth == 2 else Resolution3):
            raise ValueError(f"depth {depth} needs a {'Resolution' if depth == 2 else 'Resolution3'}, "
                             f"got {type(resolution).__name__}")
        self.resolution = resolution
        self._points = sobol_normals(resolution.n_points, resolution.seed) if depth == 3 else None

    # -- labels ----------------------------------------------------------------------------------
    def labels_of_z(self, z):
        """u for pre-activations z (N, p, T)."""
        ab = link.log_ratios(link.last_h(z, self.skip))
        return link.u_from_ratios(ab[..., 0], ab[..., 1])

    @staticmethod
    def label_of_y(y):
        return link.invert_t2(y)

    def output(self, z):
        """The attention matrix y = g(z) (N, T, T)."""
        return link.link(z, self.skip)

    # -- posterior -------------------------------------------------------------------------------
    def posterior(self, u, omega, V):
        """log Z (up to z-independent constants), mean (N, p, T), second moments (N, pT, pT)."""
        V = np.asarray(V, float)
        if V.shape != (self.p, self.p):
            raise ValueError(f"V must be {self.p} x {self.p}, got {V.shape}")
        ev = np.linalg.eigvalsh(0.5 * (V + V.T))
        if ev.min() <= 0:
            raise ParameterError("V", f"cavity covariance is not positive definite (eigenvalues {ev})",
                                 "regularise V (eps) or stop the iteration before V degenerates")
        u = np.ascontiguousarray(u, float)
        omega = np.ascontiguousarray(omega, float)
        r = self.resolution
        if self.depth == 2:
            sd1 = float(np.sqrt(V[0, 0]))
            rho, B = strip_map(self.skip, sd1, r.n0)
            neff, tol = (r.neff, 0.0) if rho >= RHO_MAX else (r.neff_strip, r.tol_strip)
            P = np.linalg.inv(V)
            z1_chart = lambda rows: posterior_2layer(u[rows], omega[rows], P, sd1, self.skip, r.n0, neff, tol,
                                                     r.max_level, rho, B, r.weight_floor, r.t_step)
            if self.uses_z2_chart(V):
                logZ, mean, second = posterior_2layer_z2(u, omega, P, float(np.sqrt(V[1, 1])), self.skip, r.n0,
                                                         r.neff_z2, r.max_level)
                bad = np.isnan(logZ)
                if bad.any():  # no feasible z2 cell (z1 at the fold): the z1 chart
                    logZ[bad], mean[bad], second[bad] = z1_chart(bad)
            else:
                logZ, mean, second = z1_chart(slice(None))
        else:
            logZ, mean, second, _ = posterior_3layer(u, omega, np.ascontiguousarray(0.5 * (V + V.T)), self.skip,
                                                     self._points, r.lam_prior, r.lam_band, r.lam_sheet, r.band)
        return logZ, mean.reshape(-1, self.p, self.T), second

    def uses_z2_chart(self, V):
        """True when the 2-layer posterior integrates over z2 (`posterior_z2.py`): a last-layer cavity
        narrow against the first layer's: V22 < z2_ratio V11, V22 < z2_max and V11 >= z2_v11_min."""
        r = self.resolution
        return (self.depth == 2 and V[1, 1] < r.z2_ratio * V[0, 0] and V[1, 1] < r.z2_max
                and V[0, 0] >= r.z2_v11_min)

    def strip_coordinates(self, v11):
        """True when the 2-layer posterior grids z1 in strip coordinates at this skip and V11 = v11 (small
        skips: 0.2-3 ms a sample against ~0.1 ms on the plain grid, docs/benchmarks.md), as `posterior`
        decides."""
        rho, _ = strip_map(self.skip, float(np.sqrt(v11)), self.resolution.n0)
        return self.depth == 2 and rho < RHO_MAX

    def posterior_covariance(self, u, omega, V):
        """Posterior mean (N, p, T) and full covariance (N, pT, pT) (index layer * T + token): the
        cross-token and cross-layer moments that the thresholds' F map and K11 use."""
        _, mean, second = self.posterior(u, omega, V)
        m = mean.reshape(-1, self.p * self.T)
        return mean, second - m[:, :, None] * m[:, None, :]

    def g_out_tokens(self, u, omega, V):
        """The native evaluation: g (N, p, T) and the token-diagonal Jacobian blocks dg (N, T, p, p) for
        labels u (N, T), omega (N, p, T) and one V (p, p)."""
        mean, cov = self.posterior_covariance(u, omega, V)
        Vi = np.linalg.inv(V)
        g = left_multiply(Vi, mean - omega)
        cov4 = cov.reshape(-1, self.p, self.T, self.p, self.T)
        cov_tt = np.einsum("natbt->ntab", cov4)
        # optimize: two pairwise products instead of einsum's one loop over all four indices (8x faster at
        # p = 2; rounding differs by ~1 ulp)
        dg = np.einsum("ab,ntbc,cd->ntad", Vi, cov_tt, Vi, optimize=True) - Vi
        return g, dg

    # -- the channel protocol (token axis folded into the batch) ---------------------------------
    def fold(self, native):
        """(N, p, T) -> (N T, p): the T rows of one sequence consecutive."""
        native = np.asarray(native, float)
        return native.transpose(0, 2, 1).reshape(-1, native.shape[1])

    def unfold(self, folded):
        """(N T, p) -> (N, p, T), the inverse of `fold`."""
        folded = np.asarray(folded, float)
        return folded.reshape(-1, self.T, folded.shape[-1]).transpose(0, 2, 1)

    def g_out(self, y, omega, V):
        """The protocol form of `g_out_tokens`: y (N T,) (the labels u, flattened), omega (N T, p), V
        (p, p) -> g (N T, p), dg (N T, p, p) (the token-diagonal blocks)."""
        V = np.asarray(V, float)
        if V.ndim == 3:
            raise ValueError("the attention channel takes one cavity covariance V (p, p) for every sample")
        u = np.asarray(y, float).reshape(-1, self.T)
        g, dg = self.g_out_tokens(u, self.unfold(omega), V)
        return self.fold(g), dg.reshape(-1, self.p, self.p)

    def sample(self, z, rng=None):
        """Labels y (N T,) (the u of each token, `labels_of_z`) for pre-activations z (N T, p); the
        channel is noiseless, rng is not used."""
        return self.labels_of_z(self.unfold(z)).reshape(-1)

    def __repr__(self):
        return f"AttentionChannel(depth={self.depth}, skip={self.skip})"
