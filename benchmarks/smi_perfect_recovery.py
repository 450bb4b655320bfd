"""The perfect-recovery threshold of the noiseless SMI SE at 2 and 3 layers, two ways (docs/validation/smi.md "The
counting identity and the perfect-recovery threshold" and "The noiseless limit at three layers: perfect recovery above alpha = 3/2").

    python benchmarks/smi_perfect_recovery.py channel [--depth 3] [--skip 1] [--n 4096] [--scrambles 2]
                                                      [--alphas 1.3,1.5,1.7]
    python benchmarks/smi_perfect_recovery.py skips [--depth 2,3] [--skips 1e-4,0.01,0.1,0.5,1,2,4] [--n 8192]

`channel`, per scramble of the SE's Sobol draws (seed 5 + k; `se.Draws`, n points):
  (closed form) the flow of the proportions v of 1 - Q_aa, v_a <- v_a / m_a, with m from
      `noiseless.tangent_response` (the V -> 0 posterior on the tangent plane of h(Z) = u): v*, alpha_PR = 1/m_1;
  (b1) the same flow with m read off the channel's own posterior at V = 1e-6 v (`linear_response`; for 3 layers
      the importance sampler of posterior3.py), started at the closed form's v*: v*, m(v*), alpha_PR +- s.e.;
  (b2) the full eps = 0 SE map through the channel (`se.qhat`, `se.prior_step`) from Q = I - 1e-6 v*, 3 steps:
      the growth factor of each 1 - Q_aa over the last step at each alpha (< 1: Q = I attracts).
`skips`: the closed form's v* and alpha_PR across skips c (cheap: no posterior).
CPU time of this process, one thread.
"""

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from seqphase.core.smi import noiseless as nl  # noqa: E402
from seqphase.core.smi import se as sse  # noqa: E402
from seqphase.core.smi.channels import AttentionChannel  # noqa: E402


def floats(text):
    return [float(x) for x in text.split(",")]


def fmt_v(v):
    return " : ".join(f"{x:.1f}" for x in v)


def channel_table(depth, skip, n, scrambles, alphas):
    ch = AttentionChannel(depth, skip)
    print(f"{depth} layers, c = {skip:g}, {n} Sobol points")
    print("| scramble | closed form: v*, alpha_PR | (b1) channel: v*, m(v*), alpha_PR | (b2) growth of 1 - Q11 at alpha = "
          + " / ".join(f"{a:g}" for a in alphas) + " | CPU-s |")
    print("|---|---|---|---|---|")
    for k in range(scrambles):
        t = time.process_time()
        draws = sse.Draws(depth, 2, n, np.random.default_rng(5 + k))
        closed = nl.perfect_recovery(ch, draws, response=nl.tangent_response)
        pr = nl.perfect_recovery(ch, draws, start=closed.v)
        growth = [nl.contraction(ch, a, draws, pr.v) for a in alphas]
        m = " / ".join(f"{x:.4f}" for x in pr.m)
        print(f"| {k + 1} | {fmt_v(closed.v)}, {closed.alpha:.4f} | {fmt_v(pr.v)}, {m} (s.e. {pr.m_se[0]:.4f}), "
              f"{pr.alpha:.4f} +- {pr.alpha_se:.4f} ({pr.steps} steps) | "
              + " / ".join(f"{g[0]:.3f}" for g in growth) + f" | {time.process_time() - t:.0f} |", flush=True)
        spread = max(float(np.ptp(g)) for g in growth)
        print(f"  (b2) largest spread of the growth factors across layers: {spread:.1e}; growth x alpha x m_1: "
              + " / ".join(f"{g[0] * a * pr.m[0]:.5f}" for g, a in zip(growth, alphas)))


def skips_table(depths, skips, n):
    print(f"closed form, {n} Sobol points (seed 5): v* (1 - Q_aa in proportion, the last layer's = 1), alpha_PR")
    print("| c | " + " | ".join(f"{d} layers: v*, alpha_PR" for d in depths) + " |")
    print("|---|" + "---|" * len(depths))
    for c in skips:
        cells = []
        for depth in depths:
            draws = sse.Draws(depth, 2, n, np.random.default_rng(5))
            pr = nl.perfect_recovery(AttentionChannel(depth, c), draws, response=nl.tangent_response)
            cells.append(f"{fmt_v(pr.v)}, {pr.alpha:.4f}")
        print(f"| {c:g} | " + " | ".join(cells) + " |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("channel")
    a.add_argument("--depth", type=int, default=3, choices=(2, 3))
    a.add_argument("--skip", type=float, default=1.0)
    a.add_argument("--n", type=int, default=4096)
    a.add_argument("--scrambles", type=int, default=2)
    a.add_argument("--alphas", type=floats, default=[1.3, 1.5, 1.7])
    b = sub.add_parser("skips")
    b.add_argument("--depth", type=lambda s: [int(x) for x in s.split(",")], default=[2, 3])
    b.add_argument("--skips", type=floats, default=[1e-4, 0.01, 0.1, 0.5, 1.0, 2.0, 4.0])
    b.add_argument("--n", type=int, default=8192)
    args = ap.parse_args(argv)
    if args.command == "channel":
        channel_table(args.depth, args.skip, args.n, args.scrambles, args.alphas)
    else:
        skips_table(args.depth, args.skips, args.n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
