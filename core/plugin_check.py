"""The identity battery of a user plug-in (`seqphase check MODULE:CLASS`): what must hold for any honest
channel or prior, checked on the plug-in as the families will use it.

Channel (a p = 1 `Likelihood`, through `plugins.DerivedScalarChannel`; a p = 2 one through the multi-index
family's derived channel, `check_vector_channel`, the same identities per component), at a few cavities
(omega, V):
- Nishimori: with y drawn by the plug-in's sampler at z ~ N(omega, V), E[g_out] = 0 and
  E[g_out^2 + dg] = 0. A sampler that disagrees with the likelihood (draws labels the likelihood does
  not give, or flips them) breaks them; the score is the largest |mean| in Monte-Carlo standard errors.
- Label law (discrete y): the sampler's label frequencies against Z_out(y | omega, V) by quadrature
  (chi-square per degree of freedom, in standard deviations of its law).
- Jacobians by finite differences: g = d log Z_out / d omega and dg = d g / d omega.
- Closed forms, where the class gives `g_out` / `log_partition`: against the derived ones.
- A batch equals its samples one by one (log_likelihood, and the derived g_out).
- Finite values at the edges: far cavity means, tiny and large variances.

Prior (through the family's denoiser, passed in): Nishimori of the denoiser (E[x0 f_in] = E[f_in^2],
E[var] = rho - E[f_in^2], with x0 drawn by the sampler), dvar: var = d f_in / dB by finite differences,
the normalisation of the density (atoms or quadrature), sample moments against the quadrature's, a batch
equal to its samples one by one, finite values at the edges.

Each row: (identity, measured, tolerance, passes). Tolerances come from the method: Monte-Carlo rows at
5 standard errors (a false alarm once in ~3.5 million), finite differences at the truncation error of a
central difference with step h (~h^2 times the third derivative's scale) plus the quadrature's relative
tolerance over h, closed forms at the derived quadrature's stated accuracy (1e-8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from seqphase.core import plugins

#: the cavities (omega, V) at which a channel is checked: the origin, moderate means, small and large
#: variances (none so far out that a label's law is too rare for 40,000 draws to see it)
CAVITIES = ((0.0, 1.0), (0.7, 0.5), (-1.3, 0.2), (1.5, 0.3), (0.3, 3.0))
N_DRAWS = 40_000
MC_SIGMAS = 5.0
CLOSED_TOL = 1e-8


@dataclass
class Row:
    identity: str
    measured: float
    tolerance: float

    @property
    def passes(self):
        return bool(np.isfinite(self.measured) and self.measured <= self.tolerance)


def _mc_score(values):
    """|mean| / standard error of a Monte-Carlo sample (0 when it has no spread and a zero mean)."""
    values = np.asarray(values, float)
    if not np.isfinite(values).all():
        return math.inf
    mean = values.mean()
    # an identity that holds sample by sample (a binary prior's variance) leaves rounding only: floor
    se = max(values.std(ddof=1) / math.sqrt(values.size), 1e-12 * (1.0 + math.sqrt(np.mean(values**2))))
    return abs(mean) / se


def check_channel(channel, seed=0):
    """The battery of a `DerivedScalarChannel` (module docstring); returns [Row]."""
    rng = np.random.default_rng(seed)
    rows = []
    nishimori_1, nishimori_2, law = 0.0, 0.0, 0.0
    for omega, V in CAVITIES:
        z = omega + math.sqrt(V) * rng.standard_normal(N_DRAWS)
        y = channel.sample_scalar(z, rng)
        g, dg = channel.derived_g_out(y, np.full(y.shape, omega), np.full(y.shape, V))
        nishimori_1 = max(nishimori_1, _mc_score(g))
        nishimori_2 = max(nishimori_2, _mc_score(g * g + dg))
        if channel.discrete:
            counts = np.array([(y == label).sum() for label in channel.labels], float)
            expected = N_DRAWS * np.exp(channel.moments(channel.labels, np.full(channel.labels.shape, omega),
                                                        np.full(channel.labels.shape, V))[0])
            keep = expected > 0
            chi2 = float((((counts - expected) ** 2)[keep] / expected[keep]).sum())
            dof = max(int(keep.sum()) - 1, 1)
            law = max(law, (chi2 - dof) / math.sqrt(2 * dof))  # ~N(0, 1) for an honest sampler
            if (counts[~keep] > 0).any():
                law = math.inf
    rows.append(Row("nishimori E[g_out] = 0 (sampler vs likelihood), max |mean| / s.e.", nishimori_1, MC_SIGMAS))
    rows.append(Row("nishimori E[g_out^2 + dg] = 0, max |mean| / s.e.", nishimori_2, MC_SIGMAS))
    if channel.discrete:
        rows.append(Row("label law: sampler frequencies vs Z_out(y), (chi2 - dof) / sqrt(2 dof)", law, MC_SIGMAS))

    # finite differences at labels the sampler draws
    h = 1e-4
    fd_g, fd_dg = 0.0, 0.0
    for omega, V in CAVITIES:
        z = omega + math.sqrt(V) * rng.standard_normal(16)
        y = channel.sample_scalar(z, rng)
        om = np.full(y.shape, omega)
        Vb = np.full(y.shape, V)
        g, dg = channel.derived_g_out(y, om, Vb)
        lz_plus, lz_minus = channel.moments(y, om + h, Vb)[0], channel.moments(y, om - h, Vb)[0]
        g_plus, _ = channel.derived_g_out(y, om + h, Vb)
        g_minus, _ = channel.derived_g_out(y, om - h, Vb)
        scale = 1.0 / math.sqrt(V)
        fd_g = max(fd_g, float(np.max(np.abs((lz_plus - lz_minus) / (2 * h) - g)) / (scale + np.max(np.abs(g)))))
        fd_dg = max(fd_dg, float(np.max(np.abs((g_plus - g_minus) / (2 * h) - dg)) / (scale**2 + np.max(np.abs(dg)))))
    # central differences: h^2 / 6 times a third derivative of relative size ~1/V^3, plus tol / h
    fd_tol = 1e-5
    rows.append(Row("jacobian g = d log Z_out / d omega (finite differences), relative", fd_g, fd_tol))
    rows.append(Row("jacobian dg = d g / d omega (finite differences), relative", fd_dg, fd_tol))

    # closed forms
    omega = np.linspace(-3.0, 3.0, 13)
    if channel.closed_g_out is not None or channel.closed_log_partition is not None:
        worst_g = worst_z = 0.0
        for V in (0.05, 0.5, 2.0):
            labels = channel.labels if channel.discrete else None
            if labels is None:
                z = omega + math.sqrt(V) * rng.standard_normal(omega.shape)
                ys = [channel.sample_scalar(z, rng)]
            else:
                ys = [np.full(omega.shape, label) for label in labels]
            for y in ys:
                Vb = np.full(omega.shape, V)
                log_z, mean, var = channel.moments(y, omega, Vb)
                ok = np.isfinite(log_z)
                if channel.closed_g_out is not None:
                    g, dg = channel.derived_g_out(y, omega, Vb)
                    gc, dgc = (np.asarray(a, float) for a in plugins.call(channel.plugin, "g_out", y, omega, Vb))
                    worst_g = max(worst_g, float(np.max((np.abs(g - gc) / (1 + np.abs(gc)))[ok], initial=0.0)),
                                  float(np.max((np.abs(dg - dgc) / (1 + np.abs(dgc)))[ok], initial=0.0)))
                if channel.closed_log_partition is not None:
                    lzc = np.asarray(plugins.call(channel.plugin, "log_partition", y, omega, Vb), float)
                    worst_z = max(worst_z, float(np.max(np.abs(log_z - lzc)[ok], initial=0.0)))
        if channel.closed_g_out is not None:
            rows.append(Row("closed form g_out, dg vs derived, max relative difference", worst_g, CLOSED_TOL))
        if channel.closed_log_partition is not None:
            rows.append(Row("closed form log_partition vs derived, max difference", worst_z, CLOSED_TOL))

    # a batch equals its samples one by one
    z = rng.standard_normal(8)
    y = channel.sample_scalar(z, rng)
    batch = channel.log_likelihood(y, z)
    single = np.array([channel.log_likelihood(y[i:i + 1], z[i:i + 1])[0] for i in range(8)])
    om, Vb = 0.5 * z, np.full(8, 0.6)
    g_batch, _ = channel.derived_g_out(y, om, Vb)
    g_single = np.array([channel.derived_g_out(y[i:i + 1], om[i:i + 1], Vb[i:i + 1])[0][0] for i in range(8)])
    both = np.concatenate([batch - single, g_batch - g_single])
    both = np.where(np.isnan(both), 0.0, both)  # -inf - -inf
    rows.append(Row("a batch equals its samples one by one, max difference", float(np.max(np.abs(both))), 1e-12))

    # finite at the edges
    edge_omega = np.array([-30.0, -8.0, 0.0, 8.0, 30.0])
    worst = 0.0
    for V in (1e-8, 1e-3, 1.0, 100.0):
        z = edge_omega + math.sqrt(V) * rng.standard_normal(edge_omega.shape)
        y = channel.sample_scalar(z, rng)
        g, dg = channel.derived_g_out(y, edge_omega, np.full(edge_omega.shape, V))
        worst = max(worst, float(np.sum(~np.isfinite(g)) + np.sum(~np.isfinite(dg))))
    rows.append(Row("finite g_out, dg at the edges (|omega| <= 30, V in 1e-8..100), non-finite count", worst, 0.0))
    return rows


#: the cavities (omega (2,), V (2, 2)) at which a p = 2 channel is checked: the origin, a correlated
#: cavity, small and large variances
VECTOR_CAVITIES = (((0.0, 0.0), ((1.0, 0.0), (0.0, 1.0))), ((0.7, -0.4), ((0.5, 0.2), (0.2, 0.4))),
                   ((-1.3, 0.8), ((0.2, -0.05), (-0.05, 0.1))), ((0.3, 1.5), ((3.0, 0.5), (0.5, 2.0))))
VECTOR_DRAWS = 400  # each a 2-d quadrature: the Monte-Carlo rows are held to 5 s.e. of 400 draws


def check_vector_channel(channel, seed=0):
    """The battery of a p = 2 channel with the multi-index interface (`posterior`, `g_out`, `sample`,
    `labels`: core/multiindex/plugin_channel.py), at `VECTOR_CAVITIES`; returns [Row]. The same identities
    as `check_channel`, per component: Nishimori E[g] = 0 and E[g g^T + dg] = 0 with y drawn by the
    sampler, the label law (discrete y), g = grad log Z_out and dg = grad g by central differences, the
    closed form `log_partition(y, omega, V)` where the class gives one, a batch equal to its samples one
    by one, finite g and dg at the edges."""
    rng = np.random.default_rng(seed)
    rows = []
    nishimori_1 = nishimori_2 = law = 0.0
    for omega, V in VECTOR_CAVITIES:
        omega, V = np.asarray(omega, float), np.asarray(V, float)
        z = omega + rng.standard_normal((VECTOR_DRAWS, 2)) @ np.linalg.cholesky(V).T
        y = channel.sample(z, rng)
        g, dg = channel.g_out(y, np.broadcast_to(omega, z.shape), V)
        second = g[:, :, None] * g[:, None, :] + dg
        nishimori_1 = max(nishimori_1, max(_mc_score(g[:, i]) for i in range(2)))
        nishimori_2 = max(nishimori_2, max(_mc_score(second[:, i, j]) for i in range(2) for j in range(i, 2)))
        if channel.discrete:
            labels = channel.labels()
            counts = np.array([(y == label).sum() for label in labels], float)
            expected = VECTOR_DRAWS * np.exp(channel.posterior(labels, np.broadcast_to(omega, (labels.size, 2)), V)[0])
            keep = expected > 0
            chi2 = float((((counts - expected) ** 2)[keep] / expected[keep]).sum())
            dof = max(int(keep.sum()) - 1, 1)
            law = max(law, math.inf if (counts[~keep] > 0).any() else (chi2 - dof) / math.sqrt(2 * dof))
    rows.append(Row("nishimori E[g_out] = 0 (sampler vs likelihood), max |mean| / s.e.", nishimori_1, MC_SIGMAS))
    rows.append(Row("nishimori E[g_out g_out^T + dg] = 0, max |mean| / s.e.", nishimori_2, MC_SIGMAS))
    if channel.discrete:
        rows.append(Row("label law: sampler frequencies vs Z_out(y), (chi2 - dof) / sqrt(2 dof)", law, MC_SIGMAS))

    h = 1e-3
    fd_g = fd_dg = 0.0
    for omega, V in VECTOR_CAVITIES:
        omega, V = np.asarray(omega, float), np.asarray(V, float)
        z = omega + rng.standard_normal((4, 2)) @ np.linalg.cholesky(V).T
        y = channel.sample(z, rng)
        om = np.broadcast_to(omega, z.shape)
        g, dg = channel.g_out(y, om, V)
        scale = 1.0 / math.sqrt(np.linalg.eigvalsh(V).min())
        for i in range(2):
            step = np.zeros(2)
            step[i] = h
            lz_plus, lz_minus = channel.posterior(y, om + step, V)[0], channel.posterior(y, om - step, V)[0]
            g_plus, g_minus = channel.g_out(y, om + step, V)[0], channel.g_out(y, om - step, V)[0]
            fd_g = max(fd_g, float(np.max(np.abs((lz_plus - lz_minus) / (2 * h) - g[:, i]))
                                    / (scale + np.abs(g).max())))
            fd_dg = max(fd_dg, float(np.max(np.abs((g_plus - g_minus) / (2 * h) - dg[:, :, i]))
                                     / (scale**2 + np.abs(dg).max())))
    # central differences: h^2 / 6 times a third derivative of relative size ~1/V^3 (1e-6 at the
    # narrowest cavity here), plus the quadrature's error over h
    rows.append(Row("jacobian g = grad log Z_out (finite differences), relative", fd_g, 1e-4))
    rows.append(Row("jacobian dg = grad g (finite differences), relative", fd_dg, 1e-4))

    closed = getattr(channel.plugin, "log_partition", None)
    if closed is not None:
        worst = 0.0
        for omega, V in VECTOR_CAVITIES:
            omega, V = np.asarray(omega, float), np.asarray(V, float)
            z = omega + rng.standard_normal((6, 2)) @ np.linalg.cholesky(V).T
            y = channel.sample(z, rng)
            om = np.broadcast_to(omega, z.shape)
            derived = channel.posterior(y, om, V)[0]
            given = np.asarray(plugins.call(channel.plugin, "log_partition", y, om, V), float)
            ok = np.isfinite(derived)
            worst = max(worst, float(np.max(np.abs(derived - given)[ok], initial=0.0)))
        rows.append(Row("closed form log_partition vs derived, max difference", worst, CLOSED_TOL))

    z = rng.standard_normal((6, 2))
    y = channel.sample(z, rng)
    om, V = 0.5 * z, np.array([[0.6, 0.1], [0.1, 0.4]])
    batch = np.concatenate([channel.log_likelihood(y, z), channel.g_out(y, om, V)[0].ravel()])
    single = np.concatenate([np.array([channel.log_likelihood(y[i:i + 1], z[i:i + 1])[0] for i in range(6)]),
                             np.concatenate([channel.g_out(y[i:i + 1], om[i:i + 1], V)[0].ravel() for i in range(6)])])
    difference = np.where(np.isnan(batch - single), 0.0, batch - single)  # -inf - -inf
    rows.append(Row("a batch equals its samples one by one, max difference", float(np.max(np.abs(difference))), 1e-12))

    worst = 0
    edge_omega = np.array([[-30.0, 2.0], [8.0, -8.0], [0.0, 0.0], [0.5, 30.0]])
    for v in (1e-6, 1e-2, 1.0, 100.0):
        z = edge_omega + math.sqrt(v) * rng.standard_normal(edge_omega.shape)
        y = channel.sample(z, rng)
        g, dg = channel.g_out(y, edge_omega, v * np.eye(2))
        worst += int(np.sum(~np.isfinite(g)) + np.sum(~np.isfinite(dg)))
    rows.append(Row("finite g_out, dg at the edges (|omega| <= 30, V in 1e-6..100 I), non-finite count", worst, 0.0))
    return rows


def check_prior(prior, seed=0):
    """The battery of a prior as the glm family uses it (`DerivedPrior`: denoise, log_partition, rho,
    sample); returns [Row]."""
    rng = np.random.default_rng(seed)
    rows = []
    n1 = n2 = 0.0
    for A in (0.3, 1.0, 5.0):
        x0 = prior.sample(N_DRAWS, rng)
        B = A * x0 + math.sqrt(A) * rng.standard_normal(N_DRAWS)
        mean, var = prior.denoise(B, np.full(B.shape, A))
        n1 = max(n1, _mc_score(x0 * mean - mean * mean))
        n2 = max(n2, _mc_score(var - (x0 * x0 - mean * mean)))
    rows.append(Row("nishimori E[x0 f_in] = E[f_in^2] (sampler vs density), max |mean| / s.e.", n1, MC_SIGMAS))
    rows.append(Row("nishimori E[var] = E[x0^2] - E[f_in^2], max |mean| / s.e.", n2, MC_SIGMAS))
    x = prior.sample(N_DRAWS, rng)
    second = x * x - prior.rho
    rows.append(Row("sample second moment vs quadrature rho, |mean| / s.e.", _mc_score(second), MC_SIGMAS))
    rows.append(Row("sample mean vs quadrature mean, |mean| / s.e.", _mc_score(x - prior.mean), MC_SIGMAS))
    rows.append(Row("density normalised: |total probability - 1|", abs(prior.total_probability - 1.0), 1e-6))
    h = 1e-5
    B = np.linspace(-3.0, 3.0, 13)
    worst = 0.0
    for A in (0.1, 1.0, 10.0):
        Ab = np.full(B.shape, A)
        _, var = prior.denoise(B, Ab)
        plus, _ = prior.denoise(B + h, Ab)
        minus, _ = prior.denoise(B - h, Ab)
        worst = max(worst, float(np.max(np.abs((plus - minus) / (2 * h) - var)) / (1 + np.max(np.abs(var)))))
    rows.append(Row("jacobian var = d f_in / dB (finite differences), relative", worst, 1e-5))
    B = rng.standard_normal(8)
    Ab = np.full(8, 0.8)
    batch = prior.denoise(B, Ab)[0]
    single = np.array([prior.denoise(B[i:i + 1], Ab[i:i + 1])[0][0] for i in range(8)])
    rows.append(Row("a batch equals its samples one by one, max difference", float(np.max(np.abs(batch - single))),
                    1e-12))
    bad = 0
    x0 = np.array([-5.0, -1.0, 0.0, 1.0, 5.0]) * math.sqrt(max(prior.rho, 1e-300))
    for A in (1e-8, 1e-2, 1.0, 1e2, 1e6):
        for xi in (-8.0, 0.0, 8.0):
            mean, var = prior.denoise(A * x0 + math.sqrt(A) * xi, np.full(x0.shape, A))
            bad += int(np.sum(~np.isfinite(mean)) + np.sum(~np.isfinite(var)))
    rows.append(Row("finite f_in, var at the edges (B = A x0 + sqrt(A) xi, |x0| <= 5 sqrt(rho), |xi| <= 8, "
                    "A in 1e-8..1e6), non-finite count", bad, 0.0))
    return rows


def table(rows):
    """The rows as text: identity, measured, tolerance, verdict."""
    width = max(len(r.identity) for r in rows)
    lines = [f"{'identity':{width}s}  {'measured':>11s}  {'tolerance':>9s}  verdict"]
    for r in rows:
        lines.append(f"{r.identity:{width}s}  {r.measured:11.3g}  {r.tolerance:9.2g}  {'holds' if r.passes else 'FAILS'}")
    return "\n".join(lines)


__all__ = ["Row", "check_channel", "check_prior", "check_vector_channel", "table"]
