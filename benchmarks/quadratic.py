"""Cost of the Bayes-optimal curve of the quadratic network (core/quadratic/se.py): the full curve on 256 alpha
per kappa, next to the authors' per-point cost (spec rie_bsr_quadratic.md §7: 70-580 ms per alpha for
Theory_no_noise.theory, 20-85 ms for Theory_noise.theory).

    python benchmarks/quadratic.py [--kappa 0.1 0.5 1 2] [--delta 0 0.25] [--points 256]

Per (kappa, delta), in one process: `setup` = the RIE MMSE table (2401 noise levels, built once per kappa and
shared by every delta) plus the parametric curve alpha(t) (2000 t); `curve` = the 256 points
alpha = linspace(1e-3, alpha_max, 256) by root-finding on the curve (alpha_max = alpha_PR noiseless, 0.6 noisy).
Wall clock; the machine may be shared (the machine line gives its load).
"""

import argparse
import time

import numpy as np

from harness import print_machine
from seqphase.core.quadratic import se, thresholds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kappa", type=float, nargs="+", default=[0.1, 0.5, 1.0, 2.0])
    parser.add_argument("--delta", type=float, nargs="+", default=[0.0, 0.25])
    parser.add_argument("--points", type=int, default=256)
    args = parser.parse_args()
    print_machine()
    print("kappa | delta | setup s | curve s | ms per alpha | total s")
    for kappa in args.kappa:
        for delta in args.delta:
            start = time.perf_counter()
            se.CURVE.table(kappa, delta)
            setup = time.perf_counter() - start
            top = thresholds.alpha_pr(kappa) if delta == 0 else 0.6
            alphas = np.linspace(1e-3, top, args.points)
            start = time.perf_counter()
            se.bo_mse(alphas, kappa, delta)
            curve = time.perf_counter() - start
            print(f"{kappa:g} | {delta:g} | {setup:.2f} | {curve:.3f} | {1e3 * curve / args.points:.2f} | "
                  f"{setup + curve:.2f}")


if __name__ == "__main__":
    main()
