"""Benchmark: GAMP-RIE of the quadratic network (core/quadratic/gamp.py), time per iteration at d = 100 and 200.

Per (d, alpha, delta), one instance (kappa = 0.5, damping 0.5, gram cavity): `--iters` iterations with tol = 0
(no early stop); reported is the median wall time per iteration over the iterations after the first, and the
breakdown of one iteration into its parts, each timed alone on the same instance (median of 5):
* project: omega = row sums of (x S_hat) * x - Tr S_hat (one n x d by d x d product),
* back: x^T diag(g) x - (sum g) I (one d x n by n x d product),
* rie: eigh of the d x d field and the RIE eigenvalue map (batched cubic roots),
* mmse: the variance from the cached RIE MMSE table.
Single-threaded BLAS (set before numpy is imported), so the figures do not depend on how many cores the shared
machine hands out. Cost model: project + back = 4 n d^2 = 4 alpha d^4 flops, i.e. x 16 per doubling of d;
memory O(n d) (x itself: 8 alpha d^3 bytes, 26 MB at d = 200, alpha = 0.4), against n d^2 floats (5.1 GB) for
the notebook's materialised X_mu = x_mu x_mu^T - I.

    python benchmarks/quadratic_gamp.py            # d = 100 and 200
    python benchmarks/quadratic_gamp.py --quick    # d = 60 and 100
"""

from __future__ import annotations

import harness

harness.single_threaded()

import argparse  # noqa: E402

import time  # noqa: E402

import numpy as np  # noqa: E402

from seqphase.core import gamp as loop  # noqa: E402
from seqphase.core.quadratic import gamp  # noqa: E402

KAPPA = 0.5


class TimedSteps(gamp.QuadraticSteps):
    """The production steps, with a clock read at each `record` (called once per iteration by the loop)."""

    def record(self, S_hat):
        self.stamps.append(time.perf_counter())
        return super().record(S_hat)


def bench(d, alpha, delta, iters):
    x, W, y = gamp.sample_instance(alpha, KAPPA, delta, d, np.random.default_rng([3, d]))
    steps = TimedSteps(x, y, W, delta, cavity="gram")
    steps.stamps = []
    steps.mmse(np.array(1.0))  # the table is built once per process: not part of an iteration
    run = loop.iterate(steps, max_iter=iters, damping=0.5, tol=0.0)
    per_iter = float(np.median(np.diff(steps.stamps)[1:]))
    S_hat = run.w
    g = steps.y - steps.project(S_hat)
    R = S_hat + 0.01 * gamp.back_projection(x, g) / d**1.5
    t = 0.05
    parts = {
        "project": harness.median_time(lambda: steps.project(S_hat), 5),
        "back": harness.median_time(lambda: gamp.back_projection(x, g), 5),
        "rie": harness.median_time(lambda: steps.rie.denoise(R, t), 5),
        "mmse": harness.median_time(lambda: steps.mmse(np.array(t)), 5),
    }
    return x.shape[0], per_iter, parts, run.mse[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="d = 60 and 100 only")
    parser.add_argument("--iters", type=int, default=12, help="iterations per instance")
    args = parser.parse_args()
    sizes = (60, 100) if args.quick else (100, 200)
    cases = [(0.2, 0.0), (0.4, 0.0), (0.25, 0.25)]
    harness.print_machine()
    print(f"GAMP-RIE, quadratic network, kappa = {KAPPA}, single-threaded BLAS, {args.iters} iterations")
    print(f"{'d':>4} {'alpha':>6} {'delta':>6} {'n':>7} {'ms/iter':>8} {'project':>8} {'back':>8} {'rie':>8} "
          f"{'mmse':>8} {'error':>7}")
    for d in sizes:
        for alpha, delta in cases:
            n, per_iter, parts, err = bench(d, alpha, delta, args.iters)
            print(f"{d:>4} {alpha:>6.2f} {delta:>6.2f} {n:>7} {1e3 * per_iter:>8.1f} "
                  + " ".join(f"{1e3 * parts[k]:>8.2f}" for k in ("project", "back", "rie", "mmse"))
                  + f" {err:>7.3f}", flush=True)


if __name__ == "__main__":
    main()
