"""`seqphase.testing`: the identity batteries that every channel and prior passes, for a researcher's own
classes as for the shipped ones (as scikit-learn's ``check_estimator`` is for estimators).

- `check_likelihood(cls, **params)`: a `seqphase.Likelihood` (p = 1 or 2) as the families use it, through
  the derived route (`core/plugins.py` `DerivedScalarChannel`, `core/multiindex/plugin_channel.py`);
- `check_prior(cls, **params)`: a `seqphase.Prior` through the glm family's `DerivedPrior`;
- `check_channel_protocol(channel)`: any family's channel object on the shared protocol (`core/channel.py`:
  g (n, p) and dg (n, p, p) on batches, token axes folded into the batch).

Each returns rows (identity, measured, tolerance, passes) and, unless ``strict=False``, raises
`AssertionError` with the table when a row fails. ``seqphase check MODULE:CLASS`` prints the same table.

What the rows check, for a channel (at a few cavities (omega, V)):
- Nishimori: with y drawn by the class's sampler at z ~ N(omega, V), E[g_out] = 0 and E[g_out^2 + dg] = 0.
  A sampler that disagrees with the likelihood (draws labels the likelihood does not give, or flips them)
  breaks them; the score is the largest |mean| in Monte-Carlo standard errors.
- Label law (discrete y): the sampler's label frequencies against Z_out(y | omega, V) by quadrature.
- Jacobians by finite differences: g = d log Z_out / d omega and dg = d g / d omega.
- Closed forms, where the class gives `g_out` / `log_partition`: against the derived ones.
- A batch equals its samples one by one; finite values at the edges.
- The derivation over a stated range: the state evolution's expectations (E[g_out^2], E log Z_out, the
  test error) run and are finite at every (overlap m, variance V = 1 - m) of `SE_RANGE`, and the SE's
  shared rule agrees with the per-sample rule that GAMP uses where labels are likely.

For a prior: Nishimori of the denoiser (E[x0 f_in] = E[f_in^2], E[var] = rho - E[f_in^2], with x0 drawn by
the sampler), var = d f_in / dB by finite differences, the normalisation (atoms and density), sample
moments against the quadrature's, a batch equal to its samples one by one, finite values at the edges,
and mmse and free entropy finite, mmse decreasing, over the SNRs of `SNR_RANGE`.

Tolerances come from the method: Monte-Carlo rows at 5 standard errors (a false alarm once in ~3.5
million), finite differences at the truncation error of a central difference with step h (~h^2 times the
third derivative's scale) plus the quadrature's relative tolerance over h, closed forms at the derived
quadrature's stated accuracy (1e-8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from seqphase.core import plugins
from seqphase.core.errors import SeqphaseError

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


def _channel_rows(channel, seed=0):
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


def _vector_channel_rows(channel, seed=0):
    """The battery of a p = 2 channel with the multi-index interface (`posterior`, `g_out`, `sample`,
    `labels`: core/multiindex/plugin_channel.py), at `VECTOR_CAVITIES`; returns [Row]. The same identities
    as `_channel_rows`, per component: Nishimori E[g] = 0 and E[g g^T + dg] = 0 with y drawn by the
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
            labels = channel.label_values()
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


def _prior_rows(prior, seed=0):
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



#: the (overlap m, variance V) at which the SE's expectations of a p = 1 channel are derived (a unit second
#: moment: V = 1 - m): no information, moderate, near perfect recovery, and V = 1e-10, where an informed
#: start begins
SE_RANGE = tuple((m, 1.0 - m) for m in (0.0, 1e-6, 0.3, 0.9, 0.999, 1.0 - 1e-6, 1.0 - 1e-10))
#: the SNRs mhat at which a prior's mmse and free entropy are derived (below 1e-6 a density prior's free
#: entropy, ~mhat rho / 2, sits under the adaptive rule's rounding floor and costs minutes)
SNR_RANGE = (0.0, 1e-6, 1e-3, 0.3, 3.0, 30.0, 1e3, 1e6)


def _range_rows(channel):
    """The derivation of a p = 1 channel over `SE_RANGE`, as the glm SE uses it: E[g_out^2], E log Z_out
    and the test error over the outer rule; a fault or a non-finite value is counted. And the SE's shared
    rule (`label_table`) against the per-sample rule (`moments`) where a label carries weight: their
    moments of t, weighted by Z_out, within 1e-8."""
    from seqphase.core.glm import se

    faults, worst = [], 0.0
    for m, V in SE_RANGE:
        try:
            values = [se.channel_mhat(channel, 1.0, m, V), se.channel_free_entropy(channel, m, V),
                      se.channel_gen_error(channel, m, V)]
            if not np.all(np.isfinite(values)):
                faults.append(f"non-finite at m = {m:g}")
        except Exception as exc:  # noqa: BLE001 -- a derivation that fails is what this row reports
            faults.append(f"{type(exc).__name__} at m = {m:g}: {exc}")
            continue
        if V < 1e-3 or V > 0.999:
            continue
        omega = math.sqrt(m) * np.linspace(-3.0, 3.0, 25)
        table_ = channel.label_table(omega, V)
        if table_ is None:
            continue
        labels = channel.table_labels()
        log_z, mean, var = table_
        y = np.repeat(labels[:, None], omega.size, axis=1)
        om = np.broadcast_to(omega, y.shape)
        density = 1.0 if channel.discrete else channel.y_rule()[1][:, None]
        likely = np.exp(log_z) * density > 1e-6
        alone = channel._moments(y[likely], om[likely], np.full(int(likely.sum()), V))
        weight = np.exp(log_z[likely])
        worst = max(worst, float(np.max(np.abs(weight * (mean[likely] - alone[1])), initial=0.0)),
                    float(np.max(np.abs(weight * (var[likely] - alone[2])), initial=0.0)))
    return [Row(f"SE expectations derived at m in {[m for m, _ in SE_RANGE]}, V = 1 - m: faults "
                f"({'; '.join(faults[:2]) or 'none'})", float(len(faults)), 0.0),
            Row("SE shared rule vs per-sample rule, Z_out-weighted moments of t, max difference", worst, 1e-8)]


def _prior_range_rows(prior):
    """mmse and free entropy over `SNR_RANGE`: finite, mmse within [0, rho] and not increasing."""
    faults, previous = [], math.inf
    for mhat in SNR_RANGE:
        try:
            mmse, entropy = prior.mmse(mhat), prior.free_entropy(mhat)
        except Exception as exc:  # noqa: BLE001 -- reported as the row's fault
            faults.append(f"{type(exc).__name__} at mhat = {mhat:g}: {exc}")
            continue
        if not (math.isfinite(mmse) and math.isfinite(entropy)):
            faults.append(f"non-finite at mhat = {mhat:g}")
        elif not (-1e-12 <= mmse <= prior.rho * (1 + 1e-9)) or mmse > previous * (1 + 1e-9) + 1e-15:
            faults.append(f"mmse {mmse:.3g} out of [0, rho] or increasing at mhat = {mhat:g}")
        previous = min(previous, mmse)
    return [Row(f"mmse, free entropy derived at mhat in {list(SNR_RANGE)}: faults "
                f"({'; '.join(faults[:2]) or 'none'})", float(len(faults)), 0.0)]


def _instance(cls, params, base):
    """The object to check: `cls` itself when it is an instance, else cls(**params); smoke-tested."""
    obj = cls(**params) if isinstance(cls, type) else cls
    if not isinstance(obj, base):
        raise TypeError(f"{obj!r} is not a seqphase.{base.__name__}")
    kind = "channel" if base is plugins.Likelihood else "prior"
    plugins.smoke_test(obj, kind, type(obj).__name__)
    return obj


def _finish(rows, strict, what):
    if strict and not all(row.passes for row in rows):
        raise AssertionError(f"{what} fails its identities:\n{table(rows)}")
    return rows


def likelihood_rows(likelihood, name, seed=0):
    """The rows of `check_likelihood` for an instance (what ``seqphase check`` prints)."""
    try:
        if int(getattr(likelihood, "p", 1)) > 1:
            from seqphase.core.multiindex.plugin_channel import DerivedVectorChannel

            return _vector_channel_rows(DerivedVectorChannel(likelihood, name=name, tol=1e-8), seed=seed)
        channel = plugins.DerivedScalarChannel(likelihood, name=name)
        return _channel_rows(channel, seed=seed) + _range_rows(channel)
    except plugins.PluginFault as fault:
        raise SeqphaseError(name, str(fault), "fix the class") from None


def prior_rows(prior, name, seed=0):
    """The rows of `check_prior` for an instance (what ``seqphase check`` prints)."""
    from seqphase.core.glm.priors import DerivedPrior

    try:
        derived = DerivedPrior(prior, name=name)
        return _prior_rows(derived, seed=seed) + _prior_range_rows(derived)
    except plugins.PluginFault as fault:
        raise SeqphaseError(name, str(fault), "fix the class") from None


def check_likelihood(cls, *, seed=0, strict=True, **params):
    """The identity battery of a channel (module docstring).

    Parameters
    ----------
    cls : type or seqphase.Likelihood
        The class (built with ``params``) or an instance; p = 1 (glm) or p = 2 (multiindex).
    seed : int
        Seed of the battery's draws.
    strict : bool
        Raise `AssertionError` (with the table) when a row fails; else just return the rows.
    **params
        The constructor's keywords.

    Returns
    -------
    list of Row
        One row per identity: ``identity``, ``measured``, ``tolerance``, ``passes``.
    """
    likelihood = _instance(cls, params, plugins.Likelihood)
    name = type(likelihood).__name__
    return _finish(likelihood_rows(likelihood, name, seed), strict, name)


def check_prior(cls, *, seed=0, strict=True, **params):
    """The identity battery of a prior (module docstring); parameters and result as `check_likelihood`."""
    prior = _instance(cls, params, plugins.Prior)
    name = type(prior).__name__
    return _finish(prior_rows(prior, name, seed), strict, name)


# -- the shared channel protocol of every family ---------------------------------------------------------


def _overlap(p):
    """An anisotropic, correlated overlap Q with eigenvalues in (0.1, 0.7)."""
    if p == 1:
        return np.array([[0.4]])
    rng = np.random.default_rng(p)
    U, _ = np.linalg.qr(rng.standard_normal((p, p)))
    return (U * np.linspace(0.1, 0.7, p)) @ U.T


def _protocol_draw(channel, n_seq, rng, Q, scale=1.0):
    """(y, omega, V) at the Bayes-optimal point, n_seq sequences of channel.tokens folded rows."""
    from seqphase.core.numerics import psd_sqrt

    p, T = channel.p, channel.tokens
    V = np.eye(p) - Q
    omega = scale * rng.standard_normal((n_seq * T, p)) @ psd_sqrt(Q).T
    z = omega + rng.standard_normal((n_seq * T, p)) @ psd_sqrt(V).T
    return channel.sample(z, rng), omega, V


def check_channel_protocol(channel, *, exact=True, n_seq=None, seed=7, strict=True):
    """The battery of a channel object on the shared protocol (`core/channel.py`), any family:

    - Nishimori at the Bayes-optimal point (omega = Q^{1/2} xi, z = omega + (I - Q)^{1/2} u, y ~ P(y | z),
      V = I - Q): E[g g^T + dg] = 0 within 5 Monte-Carlo standard errors (over independent sequences);
    - dg = d g / d omega by central differences per index and token (the others held fixed). ``exact``: a
      closed form, within 1e-6 relative (truncation ~ h^2 times the third derivative of g, ~1e-10;
      rounding ~ eps g / h, ~1e-11);
      else a quadrature, whose dg matches its own g to the rule's accuracy: median within 1e-4, at most
      5% of samples beyond 1e-2 (a refinement switch between omega +- h);
    - a batch gives what its sequences give one by one (1e-10 relative);
    - finite g and dg at a narrow cavity (V = 0.05 I) and omega drawn 3x wider than its law;
    - a p = 1 scalar channel's protocol g_out is its kernel g_out_scalar, bit for bit.

    `n_seq` sequences are drawn (default 20,000; 1,000 with tokens; 4,000 for a p >= 3 quadrature: 5 s.e.
    stay well below a wrong g's O(1) error). Returns the rows; raises `AssertionError` with the table when
    one fails, unless ``strict=False``."""
    from seqphase.core.channel import ScalarChannel

    rng = np.random.default_rng(seed)
    p, T = channel.p, channel.tokens
    if n_seq is None:
        n_seq = 1000 if T > 1 else (4000 if p >= 3 and not exact else 20000)
    y, omega, V = _protocol_draw(channel, n_seq, rng, _overlap(p))
    g, dg = channel.g_out(y, omega, V)
    n = y.shape[0]
    rows = [Row("shapes g (n, p), dg (n, p, p): 0 when they hold", float(g.shape != (n, p) or dg.shape != (n, p, p)),
                0.0),
            Row("finite g, dg at the Bayes-optimal point, non-finite count",
                float(np.sum(~np.isfinite(g)) + np.sum(~np.isfinite(dg))), 0.0)]
    terms = g[:, :, None] * g[:, None, :] + dg
    per_seq = terms.reshape(n // T, T, p, p).sum(1)
    mean = per_seq.mean(0) / T
    sem = per_seq.std(0, ddof=1) / np.sqrt(per_seq.shape[0]) / T
    rows.append(Row("nishimori E[g g^T + dg] = 0, max |mean| / (s.e. + 1e-12)",
                    float(np.max(np.abs(mean) / (sem + 1e-12))), MC_SIGMAS))

    sub = np.arange(min(n, 40 * T))
    ys, omegas, dgs = y[sub], omega[sub], dg[sub]
    errors = []
    for t in range(T):
        mine = sub % T == t
        for j in range(p):
            h = 1e-5 * np.sqrt(V[j, j])
            step = np.zeros_like(omegas)
            step[mine, j] = h
            fd = (channel.g_out(ys, omegas + step, V)[0] - channel.g_out(ys, omegas - step, V)[0]) / (2 * h)
            scale = np.abs(dgs[mine]).max(axis=(1, 2)) + 1.0 / V[j, j]
            errors.append(np.abs(fd[mine] - dgs[mine][:, :, j]).max(axis=1) / scale)
    errors = np.concatenate(errors)
    if exact:
        rows.append(Row("jacobian dg = d g / d omega (finite differences), max relative", float(errors.max()), 1e-6))
    else:
        rows.append(Row("jacobian dg = d g / d omega (finite differences), median relative",
                        float(np.median(errors)), 1e-4))
        rows.append(Row("jacobian: fraction of samples beyond 1e-2 relative", float(np.mean(errors > 1e-2)), 0.05))

    worst = 0.0
    for s in range(4):
        rows_s = slice(s * T, (s + 1) * T)
        g1, dg1 = channel.g_out(y[rows_s], omega[rows_s], V)
        for mine, whole in ((g1, g[rows_s]), (dg1, dg[rows_s])):
            worst = max(worst, float(np.max(np.abs(mine - whole) / (1e-2 + np.abs(whole)))))
    rows.append(Row("a batch equals its sequences one by one, max relative difference", worst, 1e-10))

    edge_rng = np.random.default_rng(11)
    ye, oe, Ve = _protocol_draw(channel, 50, edge_rng, 0.95 * np.eye(p), scale=3.0)
    ge, dge = channel.g_out(ye, oe, Ve)
    rows.append(Row("finite g, dg at a narrow cavity (V = 0.05 I), omega 3x wide, non-finite count",
                    float(np.sum(~np.isfinite(ge)) + np.sum(~np.isfinite(dge))), 0.0))

    if isinstance(channel, ScalarChannel):
        kernel_rng = np.random.default_rng(3)
        om = 0.6 * kernel_rng.standard_normal(500)
        yk = channel.sample(om + 0.5 * kernel_rng.standard_normal(500), kernel_rng)
        gk, dgk = channel.g_out_scalar(yk, om, 0.25)
        G, DG = channel.g_out(yk, om[:, None], np.full((1, 1), 0.25))
        same = np.array_equal(G[:, 0], gk) and np.array_equal(DG[:, 0, 0], dgk)
        rows.append(Row("p = 1: the protocol g_out is the kernel g_out_scalar; 0 when identical", float(not same), 0.0))
    return _finish(rows, strict, repr(channel))


__all__ = ["Row", "SE_RANGE", "SNR_RANGE", "check_channel_protocol", "check_likelihood", "check_prior",
           "likelihood_rows", "prior_rows", "table"]
