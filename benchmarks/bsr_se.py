"""Cost of the Bayes-optimal curve of bilinear sequence regression (core/bsr/se.py): a full alpha curve per (rho,
beta, delta), next to the authors' per-point cost (spec rie_bsr_quadratic.md §7: 20-580 ms per alpha for the
authors' theory scripts; 0.04-2.6 s per alpha for a Python port of their BSR main.jl, 0.13-0.21 s for the spec's
vectorised bracketing).

    python benchmarks/bsr_se.py [--rho 0.5] [--beta 1] [--delta 0 0.5] [--points 200]

Per (rho, beta), in one process: `table` = the rectangular RIE's MMSE table (1201 noise levels, exact quadrature,
built once per (rho, beta) and shared by every delta); per delta, `curve` = the parametric curve alpha(zeta) on
1201 zeta with its monotonicity check, and `solve` = the `points` alphas = linspace(0, alpha_max, points) in one
vectorised bisection (alpha_max = alpha_PR noiseless, 1.5 noisy). Wall clock; the machine may be shared (the machine
line gives its load).
"""

import argparse
import time

import numpy as np

from harness import print_machine
from seqphase.core import rectangular_rie
from seqphase.core.bsr import se
from seqphase.core.bsr.channels import reduce_aspect


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rho", type=float, nargs="+", default=[0.5])
    parser.add_argument("--beta", type=float, nargs="+", default=[1.0])
    parser.add_argument("--delta", type=float, nargs="+", default=[0.0, 0.5])
    parser.add_argument("--points", type=int, default=200)
    args = parser.parse_args()
    print_machine()
    print("rho | beta | delta | table s | curve s | solve s | ms per alpha (solve) | ms per alpha (all)")
    for rho in args.rho:
        for beta in args.beta:
            start = time.perf_counter()
            rectangular_rie.rectangular_mmse_table(*reduce_aspect(rho, beta))
            table = time.perf_counter() - start
            for delta in args.delta:
                start = time.perf_counter()
                se.CURVE.table(rho, beta, delta)
                curve = time.perf_counter() - start
                top = se.alpha_pr(rho, beta) if delta == 0 else 1.5
                alphas = np.linspace(0.0, top, args.points)
                start = time.perf_counter()
                se.bo_mmse(alphas, rho, beta, delta)
                solve = time.perf_counter() - start
                total = table + curve + solve
                print(f"{rho:g} | {beta:g} | {delta:g} | {table:.2f} | {curve:.3f} | {solve:.3f} | "
                      f"{1e3 * solve / args.points:.3f} | {1e3 * total / args.points:.1f}")
                table = 0.0  # built once per (rho, beta)


if __name__ == "__main__":
    main()
