"""Per-sample cost and accuracy of the deep tied attention channel's g_out and dg_out (2 layers, T = 2,
c = 1; spec smi.md §2) against a re-implementation of the reference method (spec §2.3) and an independent
dense-grid ground truth.

    python benchmarks/smi_gout.py [--samples N] [--seed S] [--batch 2048] [--ref-box 5] [--gt-n 2000]

Samples: N draws at each overlap Q = 0.05 I, diag(0, 0.95), diag(0.7, 0.98) (the SE's regimes):
omega = Q^{1/2} xi, z = omega + (I - Q + 1e-3 I)^{1/2} eta, V = I - Q + 1e-3 I, label y = g(z).

Methods (all on one core, numba-compiled integrands; compile time excluded):

* "reference as published": the label enters as y (u = (-a, b) / sqrt(a + b + 1e-6), a = log(1/y01 - 1),
  b = log(1/y10 - 1)); Z_out = scipy.integrate.dblquad (default tolerances) of sum_s w_s over z1 in
  [-3, 3]^2; the numerator sum_s w_s (Z_s - omega) (4 components) by an h-adaptive Genz-Malik cubature
  (scipy.integrate.cubature, rule "genz-malik", atol = rtol = 1e-8, no subdivision cap) on [-5, 5]^2
  (the SE code's box mismatch, spec §2.3 defect 1); g_out = V^-1 num / Z_out; dg_out by central finite
  differences in each of the 4 entries of omega, eps = 1e-5, each one calling numerator and Z_out again
  (9 + 9 integrations per sample).
* "reference, consistent box": the same, with one box [-B, B]^2 for both integrals (B = --ref-box, 5 by
  default; the GAMP code's own choice is B = 3). This is the equal-accuracy comparison.
* "ours": seqphase.core.smi.channels.AttentionChannel(2, 1.0).g_out_tokens -- g and the analytic dg in one call;
  timed unbatched (N = 1 per call) and batched (2048 samples of the same Q in one call, cost / 2048: how
  SE and GAMP call it). Also "ours, fine": the same code with a finer grid (Resolution(80, 120, 8)).
* ground truth: an independent NumPy midpoint grid, gt_n x gt_n points (1500 by default) on
  omega1 +- 8 sqrt(V11) per axis, both sheets, exact u; its own resolution error is estimated against a
  grid of 0.7 gt_n points per axis (outside the box the cavity prior alone is below e^-32).

Errors, per sample: max_entries |g - g_true| / max_entries |g_true| (same for dg, over the token-diagonal
blocks dg[t] = d g[:, t] / d omega[:, t], which are what GAMP uses). Timings are wall clock, measured
in the same process with the methods interleaved sample by sample (the machine may be shared: the
load average is printed).

The scipy cubature is vectorised (one call per region evaluates all its nodes through a compiled
function), while the published code calls the `cubature` package point by point from Python; so this
re-implementation is, if anything, faster than the published code (spec §8 measured 2.6 s per g_out
and ~10 s per g_out + dg_out for it on this class of machine).
"""

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402
from scipy import integrate  # noqa: E402
from scipy.special import expit  # noqa: E402

from seqphase.core.numerics import psd_sqrt  # noqa: E402
from seqphase.core.smi import link  # noqa: E402
from seqphase.core.smi.channels import AttentionChannel, Resolution  # noqa: E402

SKIP = 1.0
EPS_V = 1e-3
OVERLAPS = {"0.05 I": np.diag([0.05, 0.05]), "diag(0, 0.95)": np.diag([0.0, 0.95]),
            "diag(0.7, 0.98)": np.diag([0.7, 0.98])}
FINE = Resolution(n0=80, neff=120.0, max_level=8)


def clock():
    """(wall, CPU of this process) seconds: the CPU time is less sensitive to other jobs on the machine."""
    return np.array([time.perf_counter(), time.process_time()])


# --------------------------------------------------------------------------------------------------
# Reference method (spec §2.3), re-implemented from its description.
# --------------------------------------------------------------------------------------------------

def reference_u(y):
    """The reference's inversion of a 2 x 2 attention matrix: u = (-a, b) / sqrt(a + b + 1e-6)."""
    a = math.log(1.0 / y[0, 1] - 1.0)
    b = math.log(1.0 / y[1, 0] - 1.0)
    s = math.sqrt(a + b + 1e-6)
    return -a / s, b / s


@njit(cache=True)
def _ref_sheets(x0, x1, u0, u1, c, o, P):
    """For z1 = (x0, x1): the weights of both sheets and z2 on the + sheet (z2 on the - sheet is -z2)."""
    s00 = 1.0 / (1.0 + math.exp(-x0 * (x0 - x1)))
    s11 = 1.0 / (1.0 + math.exp(-x1 * (x1 - x0)))
    a00 = s00 + c
    a01 = 1.0 - s00
    a10 = 1.0 - s11
    a11 = s11 + c
    det = a00 * a11 - a01 * a10
    z20 = (a11 * u0 - a01 * u1) / det
    z21 = (a00 * u1 - a10 * u0) / det
    d10 = x0 - o[0]
    d11 = x1 - o[1]
    q1 = P[0] * (d10 * d10 + d11 * d11)
    dp0 = z20 - o[2]
    dp1 = z21 - o[3]
    dm0 = -z20 - o[2]
    dm1 = -z21 - o[3]
    qp = q1 + 2.0 * P[1] * (d10 * dp0 + d11 * dp1) + P[2] * (dp0 * dp0 + dp1 * dp1)
    qm = q1 + 2.0 * P[1] * (d10 * dm0 + d11 * dm1) + P[2] * (dm0 * dm0 + dm1 * dm1)
    ad = abs(det)
    return math.exp(-0.5 * qp) / ad, math.exp(-0.5 * qm) / ad, z20, z21


@njit(cache=True)
def _ref_z_integrand(x1, x0, u0, u1, c, o, P):
    """Z_out integrand sum_s w_s(z1), in dblquad's argument order f(inner, outer)."""
    wp, wm, _, _ = _ref_sheets(x0, x1, u0, u1, c, o, P)
    return wp + wm


@njit(cache=True)
def _ref_num_integrand(x, u0, u1, c, o, P):
    """Numerator integrand sum_s w_s (Z_s - omega) at the points x (npoints, 2): (npoints, 4), index
    layer * 2 + token."""
    n = x.shape[0]
    out = np.empty((n, 4))
    for k in range(n):
        x0 = x[k, 0]
        x1 = x[k, 1]
        wp, wm, z20, z21 = _ref_sheets(x0, x1, u0, u1, c, o, P)
        w = wp + wm
        out[k, 0] = w * (x0 - o[0])
        out[k, 1] = w * (x1 - o[1])
        out[k, 2] = wp * (z20 - o[2]) + wm * (-z20 - o[2])
        out[k, 3] = wp * (z21 - o[3]) + wm * (-z21 - o[3])
    return out


class Reference:
    """g_out and finite-difference dg_out by the reference's integrators; box_z / box_num: half-widths
    of the fixed boxes of Z_out and of the numerator. Counts non-converged cubatures."""

    def __init__(self, box_z, box_num, c=SKIP, fd_eps=1e-5):
        self.box_z, self.box_num, self.c, self.fd_eps = box_z, box_num, c, fd_eps
        self.not_converged = 0

    def _g(self, u, omega, V, Vi):
        o = np.ascontiguousarray(omega, float).reshape(4)
        P = np.array([Vi[0, 0], Vi[0, 1], Vi[1, 1]])
        args = (u[0], u[1], self.c, o, P)
        B = self.box_z
        Z, _ = integrate.dblquad(_ref_z_integrand, -B, B, -B, B, args=args)
        B = self.box_num
        res = integrate.cubature(_ref_num_integrand, [-B, -B], [B, B], rule="genz-malik", atol=1e-8, rtol=1e-8,
                                 max_subdivisions=None, args=args)
        if res.status != "converged":
            self.not_converged += 1
        return Vi @ (np.asarray(res.estimate).reshape(2, 2) / Z)

    def g_out(self, y, omega, V):
        """g (p, T) and its (wall, CPU) seconds."""
        t0 = clock()
        g = self._g(reference_u(y), omega, V, np.linalg.inv(V))
        return g, clock() - t0

    def g_dg(self, y, omega, V):
        """g (p, T) from the centre call, dg (T, p, p) with dg[t, m, a] = d g[m, t] / d omega[a, t], and
        the (wall, CPU) seconds of the centre call (g only) and of all 9 calls (g + dg)."""
        u = reference_u(y)
        Vi = np.linalg.inv(V)
        t0 = clock()
        g = self._g(u, omega, V, Vi)
        t_g = clock() - t0
        full = np.empty((2, 2, 2, 2))  # d g[m, k] / d omega[a, t] at [a, t, m, k]
        for a in range(2):
            for t in range(2):
                e = np.zeros((2, 2))
                e[a, t] = self.fd_eps
                full[a, t] = (self._g(u, omega + e, V, Vi) - self._g(u, omega - e, V, Vi)) / (2 * self.fd_eps)
        t_all = clock() - t0
        dg = np.einsum("atmt->tma", full)
        return g, dg, t_g, t_all


# --------------------------------------------------------------------------------------------------
# Ground truth: independent dense midpoint grid (NumPy), exact u.
# --------------------------------------------------------------------------------------------------

def dense_truth(u, omega, V, c=SKIP, n=2000, box=8.0, chunk=250):
    """g (p, T) and dg (T, p, p) from the posterior moments on an n x n midpoint grid over
    omega1 +- box sqrt(V11) per axis (log-sum-exp stabilised, rows in chunks)."""
    P = np.linalg.inv(V)
    sd = math.sqrt(V[0, 0])
    step = 2 * box * sd / n
    x0 = omega[0, 0] - box * sd + (np.arange(n) + 0.5) * step
    x1 = omega[0, 1] - box * sd + (np.arange(n) + 0.5) * step
    o = omega.reshape(4)
    parts = []
    for lo in range(0, n, chunk):
        X0, X1 = np.meshgrid(x0[lo:lo + chunk], x1, indexing="ij")
        X0, X1 = X0.reshape(-1), X1.reshape(-1)
        # row t of softmax(z1 z1^T) is softmax((z1_t z1_0, z1_t z1_1)): a two-way softmax, i.e. a sigmoid
        s00 = expit(X0 * X0 - X0 * X1)
        s11 = expit(X1 * X1 - X0 * X1)
        a00, a01, a10, a11 = s00 + c, 1.0 - s00, 1.0 - s11, s11 + c
        det = a00 * a11 - a01 * a10
        h0 = (a11 * u[0] - a01 * u[1]) / det
        h1 = (a00 * u[1] - a10 * u[0]) / det
        D = np.empty((h0.size, 4))
        D[:, 0] = X0 - o[0]
        D[:, 1] = X1 - o[1]
        q1 = P[0, 0] * (D[:, 0] ** 2 + D[:, 1] ** 2)
        logdet = np.log(np.abs(det))
        for sign in (1.0, -1.0):
            D[:, 2] = sign * h0 - o[2]
            D[:, 3] = sign * h1 - o[3]
            q = q1 + 2 * P[0, 1] * (D[:, 0] * D[:, 2] + D[:, 1] * D[:, 3]) + P[1, 1] * (D[:, 2] ** 2 + D[:, 3] ** 2)
            lw = -0.5 * q - logdet
            top = lw.max()
            w = np.exp(lw - top)
            wD = D * w[:, None]
            parts.append((top, w.sum(), w @ D, wD.T @ D))
    top = max(p[0] for p in parts)
    s0 = sum(p[1] * math.exp(p[0] - top) for p in parts)
    s1 = sum(p[2] * math.exp(p[0] - top) for p in parts) / s0
    s2 = sum(p[3] * math.exp(p[0] - top) for p in parts) / s0
    cov = s2 - np.outer(s1, s1)  # posterior covariance of vec Z (index layer * 2 + token)
    g = P @ s1.reshape(2, 2)  # V^-1 (<Z> - omega)
    cov4 = cov.reshape(2, 2, 2, 2)
    dg = np.stack([P @ cov4[:, t, :, t] @ P - P for t in range(2)])
    return g, dg


# --------------------------------------------------------------------------------------------------

def draw(Q, n, rng):
    V = np.eye(2) - Q + EPS_V * np.eye(2)
    omega = np.einsum("ab,nbt->nat", psd_sqrt(Q), rng.standard_normal((n, 2, 2)))
    z = omega + np.einsum("ab,nbt->nat", psd_sqrt(V), rng.standard_normal((n, 2, 2)))
    return omega, z, V


def rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def _time_ours(ch, u, omega, V, repeats):
    ts = []
    for _ in range(repeats):
        t0 = clock()
        g, dg = ch.g_out_tokens(u, omega, V)
        ts.append(clock() - t0)
    return g, dg, np.median(ts, axis=0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=3, help="samples per overlap Q (default 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=2048, help="batch size of the batched timing of ours")
    parser.add_argument("--ref-box", type=float, default=5.0, help="box half-width of the consistent reference")
    parser.add_argument("--gt-n", type=int, default=1500, help="ground-truth grid points per axis")
    parser.add_argument("--skip-published", action="store_true", help="do not run the published reference")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    ch = AttentionChannel(2, SKIP)
    ch_fine = AttentionChannel(2, SKIP, FINE)
    methods = ["ours", "ours, fine"] + ([] if args.skip_published else ["reference as published"]) \
        + ["reference, consistent box"]
    refs = {"reference, consistent box": Reference(args.ref_box, args.ref_box)}
    if not args.skip_published:
        refs["reference as published"] = Reference(3.0, 5.0)

    # warm-up: numba compilation (cached on disk after the first run) is not part of the timings
    om0, z0, V0 = draw(OVERLAPS["0.05 I"], 2, rng)
    ch.g_out_tokens(ch.labels_of_z(z0), om0, V0)
    ch_fine.g_out_tokens(ch.labels_of_z(z0), om0, V0)
    Reference(3.0, 3.0).g_out(link.link(z0[0], SKIP), om0[0], V0)

    print(f"# load average at start: {os.getloadavg()}  (cpus: {os.cpu_count()})", flush=True)
    rec = {m: {"eg": [], "edg": [], "tg": [], "tgdg": []} for m in methods}
    gt_err = []
    batched = {}
    per_q = {}
    for qname, Q in OVERLAPS.items():
        omega, z, V = draw(Q, args.samples, rng)
        u = ch.labels_of_z(z)
        y = link.link(z, SKIP)
        per_q[qname] = {m: [] for m in methods}
        for k in range(args.samples):
            g_t, dg_t = dense_truth(u[k], omega[k], V, n=args.gt_n)
            g_c, dg_c = dense_truth(u[k], omega[k], V, n=int(0.7 * args.gt_n))
            gt_err.append((rel(g_c, g_t), rel(dg_c, dg_t)))
            order = list(methods) if k % 2 == 0 else list(reversed(methods))  # interleave
            for m in order:
                if m.startswith("ours"):
                    c = ch if m == "ours" else ch_fine
                    g, dg, t = _time_ours(c, u[k:k + 1], omega[k:k + 1], V, repeats=5)
                    g, dg, tg, tall = g[0], dg[0], t, t
                else:
                    g, dg, tg, tall = refs[m].g_dg(y[k], omega[k], V)
                r = rec[m]
                r["eg"].append(rel(g, g_t))
                r["edg"].append(rel(dg, dg_t))
                r["tg"].append(tg)
                r["tgdg"].append(tall)
                per_q[qname][m].append((r["eg"][-1], r["edg"][-1], tall))
            print(f"{qname:16s} sample {k}: " + "  ".join(
                f"{m}: g {rec[m]['eg'][-1]:.1e} dg {rec[m]['edg'][-1]:.1e} {rec[m]['tgdg'][-1][0]:.3g}s"
                for m in methods) + f"  | truth self-check g {gt_err[-1][0]:.1e} dg {gt_err[-1][1]:.1e}",
                flush=True)
        # batched: as the SE / GAMP call it
        omb, zb, Vb = draw(Q, args.batch, rng)
        ub = ch.labels_of_z(zb)
        for name, c, repeats in (("ours", ch, 3), ("ours, fine", ch_fine, 1)):
            ts = []
            for _ in range(repeats):
                t0 = clock()
                c.g_out_tokens(ub, omb, Vb)
                ts.append((clock() - t0) / args.batch)
            batched.setdefault(name, []).append(np.median(ts, axis=0))
    print(f"# load average at end: {os.getloadavg()}", flush=True)

    gt = np.array(gt_err)
    print(f"\nground truth ({args.gt_n}^2 grid) vs {int(0.7 * args.gt_n)}^2: max rel. diff g {gt[:, 0].max():.1e}, "
          f"dg {gt[:, 1].max():.1e}")
    n = len(OVERLAPS) * args.samples
    print(f"\n{n} samples ({args.samples} per Q); errors relative to the ground truth (max-entry norm); seconds "
          "per sample, wall clock (CPU in brackets): median over the samples, min; batched: mean over "
          f"{args.batch} samples per Q, median over the Qs.\n")
    print("| method | g err median | g err max | dg err median | dg err max | s g | s g+dg | min s g+dg "
          "| batched s g+dg |")
    print("|" + "---|" * 9)
    med = {m: {k: np.median(np.array(v), axis=0) for k, v in rec[m].items()} for m in methods}
    bat = {m: np.median(np.array(v), axis=0) for m, v in batched.items()}
    for m in methods:
        r, d = rec[m], med[m]
        b = f"{bat[m][0]:.2e} ({bat[m][1]:.2e})" if m in bat else "-"
        print(f"| {m} | {d['eg']:.1e} | {np.max(r['eg']):.1e} | {d['edg']:.1e} | {np.max(r['edg']):.1e} | "
              f"{d['tg'][0]:.3g} ({d['tg'][1]:.3g}) | {d['tgdg'][0]:.3g} ({d['tgdg'][1]:.3g}) | "
              f"{np.min(np.array(r['tgdg'])[:, 0]):.3g} | {b} |")
    print("\nper overlap (median g err / dg err / wall s per g+dg):")
    for qname, d in per_q.items():
        print(f"  {qname:16s} " + "  ".join(
            f"{m}: {np.median([x[0] for x in v]):.1e}/{np.median([x[1] for x in v]):.1e}/"
            f"{np.median([x[2][0] for x in v]):.3g}s" for m, v in d.items()))
    for m, ref in refs.items():
        if ref.not_converged:
            print(f"note: {m}: {ref.not_converged} cubatures did not converge")

    print("\nspeed-up = median reference seconds / ours seconds (N=1: median; batched: mean per sample), "
          "wall [CPU]:")
    for refname in refs:
        for m in ("ours", "ours, fine"):
            rg, rgdg, o1, ob = med[refname]["tg"], med[refname]["tgdg"], med[m]["tgdg"], bat[m]
            better = all(np.median(rec[m][k]) <= np.median(rec[refname][k]) and np.max(rec[m][k]) <= np.max(
                rec[refname][k]) for k in ("eg", "edg"))
            print(f"  {m:10s} vs {refname:26s}: g {rg[0] / o1[0]:6.0f}x [{rg[1] / o1[1]:6.0f}x] (N=1) "
                  f"{rg[0] / ob[0]:6.0f}x [{rg[1] / ob[1]:6.0f}x] (batched); "
                  f"g+dg {rgdg[0] / o1[0]:6.0f}x [{rgdg[1] / o1[1]:6.0f}x] (N=1) "
                  f"{rgdg[0] / ob[0]:6.0f}x [{rgdg[1] / ob[1]:6.0f}x] (batched); errors (median and max, g and dg) "
                  f"{'<=' if better else 'NOT all <='} the reference's")
    print("\nfor scale: the published code itself was measured (spec smi.md §8, one core, uncontended) at 2.6 s per "
          "g_out and ~10 s per g_out + dg_out; against ours' CPU seconds:")
    for m in ("ours", "ours, fine"):
        o1, ob = med[m]["tgdg"][1], bat[m][1]
        print(f"  {m:10s}: g {2.6 / o1:6.0f}x (N=1) {2.6 / ob:6.0f}x (batched); "
              f"g+dg {10 / o1:6.0f}x (N=1) {10 / ob:6.0f}x (batched)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
