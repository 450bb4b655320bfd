"""Cost and accuracy of the rectangular RIE (core/rectangular_rie.py): per-zeta cost of mmse, the MMSE table
per (rho, beta) and its interpolation error, and the denoiser on sampled d x L matrices.

    python benchmarks/rectangular_rie.py [--pairs 0.2,1 0.5,1 1,1 0.2,2 0.5,2] [--repeat 3]

Per (rho, beta):
* mmse/zeta: wall time of RectangularRIE.mmse on 256 log-spaced zeta in [1e-6, 1e3], per zeta (best of
  --repeat), and of one scalar call at zeta = 0.5;
* table: wall time of a fresh RectangularMMSETable (the lru_cache is bypassed) and its size;
* table err: max relative |table.mmse - mmse| at all log-midpoints of the grid (off-grid, where the PCHIP
  error is largest), and max relative |table.zeta_of_mmse(mmse(zeta)) - zeta| there;
* quad err: max relative change of mmse on 100 zeta in [1e-7, 1e4] when the rule is refined
  (20 levels x 24 nodes instead of LEVELS x NODES_PER_PANEL).
Then the denoiser at rho = 0.5, zeta = 0.7 for (d, L) = (100, 100) and (100, 200): wall time (best of
--repeat; thin SVD + singular-value map) and |MSE - mmse| of one draw.
Wall clock; the machine may be shared (the machine line gives its load).
"""

import argparse
import math

import numpy as np

from harness import best_time, print_machine
from seqphase.core.rectangular_rie import RectangularMMSETable, RectangularRIE


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", nargs="+", default=["0.2,1", "0.5,1", "1,1", "0.2,2", "0.5,2"],
                        help="rho,beta pairs")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print_machine()
    print(" | ".join(("rho", "beta", "mmse ms/zeta (256)", "mmse ms (1)", "table s", "points", "table err",
                      "inverse err", "quad err")))
    for pair in args.pairs:
        rho, beta = map(float, pair.split(","))
        rie = RectangularRIE(rho, beta)
        zetas = np.logspace(-6, 3, 256)
        batch_s, _ = best_time(lambda: rie.mmse(zetas), args.repeat)
        single_s, _ = best_time(lambda: rie.mmse(0.5), args.repeat)
        table_s, table = best_time(lambda: RectangularMMSETable(rie), 1)
        mid = np.sqrt(table.zeta[:-1] * table.zeta[1:])
        exact = rie.mmse(mid)
        table_err = np.max(np.abs(table.mmse(mid) - exact) / exact)
        inverse_err = np.max(np.abs(table.zeta_of_mmse(exact) - mid) / mid)
        fine = RectangularRIE(rho, beta)
        fine.LEVELS, fine.NODES_PER_PANEL = 20, 24
        probe = np.logspace(-7, 4, 100)
        coarse = rie.mmse(probe)
        quad_err = np.max(np.abs(coarse - fine.mmse(probe)) / coarse)
        print(f"{rho:g} | {beta:g} | {1e3 * batch_s / len(zetas):.2f} | {1e3 * single_s:.2f} | {table_s:.2f} | "
              f"{len(table.zeta)} | {table_err:.1e} | {inverse_err:.1e} | {quad_err:.1e}")
    print("d | L | denoise s | |MSE - mmse|")
    rng = np.random.default_rng(0)
    rho, zeta = 0.5, 0.7
    for d, L in [(100, 100), (100, 200)]:
        rie = RectangularRIE(rho, L / d)
        r = max(1, round(rho * d))
        S = rng.standard_normal((d, r)) @ rng.standard_normal((L, r)).T / math.sqrt(r)
        Y = S + math.sqrt(zeta) * rng.standard_normal((d, L))
        denoise_s, estimate = best_time(lambda: rie.denoise(Y, zeta), args.repeat)
        gap = abs(np.mean((estimate - S) ** 2) - rie.mmse(zeta))
        print(f"{d} | {L} | {denoise_s:.4f} | {gap:.1e}")


if __name__ == "__main__":
    main()
