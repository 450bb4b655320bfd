"""Cost of one ERM state-evolution curve of the quadratic network (core/quadratic/erm.py), next to the spec's
estimate for the authors' code (erm_quadratic.md §6: about 0.1-1 s CPU per point).

    python benchmarks/quadratic_erm.py [--kappa-star 0.5] [--kappa 2] [--delta 0.5] [--lam 0.1] [--points 256]

`table` = the xi-continuation (erm.XI_POINTS log-spaced xi, one q-equation each, monotonicity check), built once
per (kappa_star, kappa, delta, lam); `curve` = the points alpha = linspace(0.01, 0.8, points) mapped onto it (one
brentq in log xi per alpha). Wall clock; the machine may be shared (the machine line gives its load).
"""

import argparse
import time

import numpy as np

from harness import print_machine
from seqphase.core.quadratic import erm


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kappa-star", type=float, nargs="+", default=[0.5])
    parser.add_argument("--kappa", type=float, default=2.0)
    parser.add_argument("--delta", type=float, default=0.5)
    parser.add_argument("--lam", type=float, default=0.1)
    parser.add_argument("--points", type=int, default=256)
    args = parser.parse_args()
    print_machine()
    print("kappa_star | kappa | delta | lam | table s | curve s | ms per alpha | total s")
    for kappa_star in args.kappa_star:
        curve = erm.ERMCurve(kappa_star, args.kappa, args.delta, args.lam)
        start = time.perf_counter()
        curve.table()
        table = time.perf_counter() - start
        alphas = np.linspace(0.01, 0.8, args.points)
        start = time.perf_counter()
        for alpha in alphas:
            curve.at_alpha(alpha)
        points = time.perf_counter() - start
        print(f"{kappa_star:g} | {args.kappa:g} | {args.delta:g} | {args.lam:g} | {table:.2f} | {points:.2f} | "
              f"{1e3 * points / args.points:.1f} | {table + points:.2f}")


if __name__ == "__main__":
    main()
