"""Cost and accuracy of the symmetric RIE (core/rie.py): one MMSE table per rho, a direct mmse call at 256
noise levels, the table's interpolation error, and the denoiser on a sampled matrix.

    python benchmarks/rie.py [--rho 0.2 0.5 1 2] [--repeat 3] [--d 1000]

Per rho:
* table: wall time of MMSETable (TABLE_POINTS log-spaced delta in [1e-8, 1e4], exact mmse at each), the
  best of --repeat fresh builds (the lru_cache of mmse_table is bypassed);
* mmse(256): wall time of SymmetricRIE.mmse on 256 log-spaced delta in [1e-6, 1e3];
* table error: max relative |table.mmse - mmse| at the 2400 log-midpoints of the grid (off-grid, where a
  PCHIP error is largest) and max relative |table.delta_of_mmse(mmse(delta)) - delta| there;
* quadrature error: max relative change of mmse on 200 delta when the rule is refined (24 levels x 30
  nodes instead of LEVELS x NODES_PER_PANEL);
* sampled: d x d matrix at delta = 0.3, |||denoise(Y) - S||_F^2 / d - mmse| and the wall time of denoise.
Wall clock; the machine may be shared (the machine line gives its load).
"""

import argparse
import math

import numpy as np

from harness import best_time, print_machine
from seqphase.core.rie import MMSETable, SymmetricRIE


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rho", type=float, nargs="+", default=[0.2, 0.5, 1.0, 2.0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--d", type=int, default=1000)
    args = parser.parse_args()
    print_machine()
    header = ("rho", "table s", "points", "mmse(256) s", "table err", "inverse err", "quad err",
              "|MSE-mmse|", "denoise s")
    print(" | ".join(header))
    rng = np.random.default_rng(0)
    for rho in args.rho:
        rie = SymmetricRIE(rho)
        table_s, table = best_time(lambda: MMSETable(rie), args.repeat)
        deltas = np.logspace(-6, 3, 256)
        mmse_s, _ = best_time(lambda: rie.mmse(deltas), args.repeat)
        mid = np.sqrt(table.delta[:-1] * table.delta[1:])
        exact = rie.mmse(mid)
        table_err = np.max(np.abs(table.mmse(mid) - exact) / exact)
        inverse_err = np.max(np.abs(table.delta_of_mmse(exact) - mid) / mid)
        fine = SymmetricRIE(rho)
        fine.LEVELS, fine.NODES_PER_PANEL = 24, 30
        probe = np.logspace(-8, 4, 200)
        coarse_values = rie.mmse(probe)
        quad_err = np.max(np.abs(coarse_values - fine.mmse(probe)) / coarse_values)
        d, delta = args.d, 0.3
        r = max(1, round(rho * d))
        W = rng.standard_normal((d, r))
        S = W @ W.T / math.sqrt(r * d)
        A = rng.standard_normal((d, d))
        Y = S + math.sqrt(delta) * (A + A.T) / math.sqrt(2 * d)
        denoise_s, estimate = best_time(lambda: rie.denoise(Y, delta), 1)
        mse_gap = abs(np.sum((estimate - S) ** 2) / d - rie.mmse(delta))
        print(f"{rho:g} | {table_s:.2f} | {len(table.delta)} | {mmse_s:.3f} | {table_err:.1e} | "
              f"{inverse_err:.1e} | {quad_err:.1e} | {mse_gap:.1e} | {denoise_s:.2f}")


if __name__ == "__main__":
    main()
