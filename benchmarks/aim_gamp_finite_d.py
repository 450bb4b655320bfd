"""Finite-d bias of AIM GAMP-RIE (softmax, T = 2, rho = 0.5) and its extrapolation d -> infinity.

At d = 100 the GAMP error sits above the Bayes-optimal SE by ~0.02 at alpha = 0.1 (docs/validation/aim.md). This
script measures the mean error over `--seeds` instances at several d (each instance from
SeedSequence([SEED, d, alpha * 1e6]).spawn, the same at every run), fits mean(d) = e_inf + b / d by
weighted least squares (weights 1 / s.e.^2), and prints e_inf with its standard error next to the SE.
A 1/d law is what a finite-size correction of an extensive-rank spectral estimator gives to leading order;
the fit's chi^2 per degree of freedom says whether the data follow it.

    python benchmarks/aim_gamp_finite_d.py                      # d = 60..200, 16 seeds (~10 CPU-minutes)
    python benchmarks/aim_gamp_finite_d.py --d 60 100 --seeds 8 # quicker
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from harness import print_machine
from seqphase.core import gamp
from seqphase.core.aim import gamp as gamp_mod
from seqphase.core.aim import se
from seqphase.core.aim.channels import make_channel

SEED = 20261125


def mean_error(alpha, rho, T, d, seeds, max_iter=500, damping=0.5, tol=1e-5, channel_name="softmax",
               gout="exact"):
    channel = make_channel(channel_name, T, gout)
    errors = []
    for child in np.random.SeedSequence([SEED, d, int(round(alpha * 1e6))]).spawn(seeds):
        X, S, y = gamp_mod.sample_instance(channel, alpha, rho, d, np.random.default_rng(child))
        trace = gamp.iterate(gamp_mod.AIMSteps(channel, X, y, S, rho), max_iter=max_iter, damping=damping, tol=tol)
        errors.append(trace.mse[-1])
    errors = np.array(errors)
    return errors.mean(), errors.std(ddof=1) / math.sqrt(len(errors))


def fit_inverse_d(ds, means, ses):
    """Weighted least squares of mean = e_inf + b / d: (e_inf, its s.e., b, chi^2 per dof)."""
    A = np.column_stack([np.ones(len(ds)), 1.0 / np.asarray(ds, float)])
    w = 1.0 / np.asarray(ses) ** 2
    cov = np.linalg.inv(A.T @ (A * w[:, None]))
    coef = cov @ (A.T @ (w * np.asarray(means)))
    chi2 = float(np.sum(w * (np.asarray(means) - A @ coef) ** 2))
    return coef[0], math.sqrt(cov[0, 0]), coef[1], chi2 / max(len(ds) - 2, 1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--rho", type=float, default=0.5)
    parser.add_argument("--T", type=int, default=2)
    parser.add_argument("--d", type=int, nargs="+", default=[60, 80, 100, 141, 200])
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--channel", choices=("softmax", "hardmax"), default="softmax")
    parser.add_argument("--gout", choices=("exact", "paper"), default="exact", help="hardmax g_out")
    args = parser.parse_args(argv)
    if args.channel == "softmax":
        se_mse = se.closed_form_se(args.alpha, args.rho, se.counting_k("softmax", args.T)).mse
    else:
        se_mse = se.hardmax_se(args.alpha, args.rho, gout=args.gout).mse
    print_machine()
    print(f"{args.channel} T = {args.T}, rho = {args.rho}, alpha = {args.alpha}: SE {se_mse:.4f}")
    print(f"{'d':>5} {'mean':>8} {'s.e.':>7} {'mean - SE':>10} {'in s.e.':>8} {'seconds':>8}")
    means, ses = [], []
    for d in args.d:
        start = time.perf_counter()
        mean, s_e = mean_error(args.alpha, args.rho, args.T, d, args.seeds, channel_name=args.channel,
                               gout=args.gout)
        means.append(mean)
        ses.append(s_e)
        print(f"{d:5d} {mean:8.4f} {s_e:7.4f} {mean - se_mse:+10.4f} {(mean - se_mse) / s_e:+8.2f} "
              f"{time.perf_counter() - start:8.1f}", flush=True)
    if len(args.d) >= 2:
        e_inf, e_se, b, chi2 = fit_inverse_d(args.d, means, ses)
        print(f"fit mean = e_inf + b/d: e_inf = {e_inf:.4f} +- {e_se:.4f} (SE {se_mse:.4f}, "
              f"{(e_inf - se_mse) / e_se:+.2f} s.e.), b = {b:.2f}, chi2/dof = {chi2:.2f}")


if __name__ == "__main__":
    main()
