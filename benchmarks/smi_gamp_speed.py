"""Cost of SMI GAMP per sample and iteration across skips c, and the g_out throughput of the 2-layer channel
at fixed overlaps (docs/benchmarks.md, "SMI GAMP at small skips").

    python benchmarks/smi_gamp_speed.py [--d 1000] [--alpha 0.9] [--iters 30] [--seed 1]
                                        [--skips 1e-4,0.01,0.1,0.5,1] [--batch 1024] [--no-gout]

GAMP: one instance (d, alpha, `--seed`), `core.smi.gamp.AttentionSteps` for `--iters` iterations (tol = 0, so every
iteration runs; damping 0.2, random start): the CPU time of the channel calls (`g_out_tokens`, wrapped) and
of the whole run, in ms per sample and iteration (n = alpha d samples), with the first / last iteration's
channel cost (the cavity V shrinks as GAMP learns, and the posterior narrows with it), and the final
|M11|, |M22|. g_out: `--batch` model draws per overlap Q = diag(0, 0.5), diag(0, 0.9), diag(0.5, 0.99)
(`draw`: V = I - Q + 1e-3 I), CPU ms per sample of one batched call.

CPU time of this process (time.process_time), one thread (the BLAS and numba thread counts are set to 1): it is
less sensitive than wall time to other jobs on a shared machine; the machine line (harness.py) gives the load.
Compile time is excluded (one small call first). Run it on two versions of the code under the same load to
compare them.
"""

import harness

harness.single_threaded()

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import seqphase  # noqa: E402
from seqphase.core import gamp  # noqa: E402
from seqphase.core.numerics import psd_sqrt  # noqa: E402
from seqphase.core.smi import gamp as sgamp  # noqa: E402
from seqphase.core.smi.channels import AttentionChannel  # noqa: E402

OVERLAPS = {"diag(0, 0.5)": np.diag([0.0, 0.5]), "diag(0, 0.9)": np.diag([0.0, 0.9]),
            "diag(0.5, 0.99)": np.diag([0.5, 0.99])}
EPS_V = 1e-3  # the cavity variance's floor: V = I - Q + EPS_V I


def draw(Q, n, rng):
    """n model draws at overlap Q: (omega (n, 2, 2), z (n, 2, 2), V), omega ~ N(0, Q) and z ~ N(omega, V) per
    token, V = I - Q + EPS_V I."""
    V = np.eye(2) - Q + EPS_V * np.eye(2)
    omega = np.einsum("ab,nbt->nat", psd_sqrt(Q), rng.standard_normal((n, 2, 2)))
    z = omega + np.einsum("ab,nbt->nat", psd_sqrt(V), rng.standard_normal((n, 2, 2)))
    return omega, z, V


def gamp_cost(c, d, alpha, iters, seed):
    """(ms per sample-iteration of the channel, of the whole run, first and last iteration's channel cost,
    |M11|, |M22| final)."""
    ch = AttentionChannel(2, c)
    X, W, _, u = sgamp.sample_instance(ch, alpha, d, np.random.default_rng(seed))
    ch.g_out_tokens(u[:2], np.zeros((2, 2, 2)), np.eye(2))  # compile / load the cache
    spent = []
    inner = ch.g_out_tokens

    def timed(u_, omega, V):
        t = time.process_time()
        out = inner(u_, omega, V)
        spent.append(time.process_time() - t)
        return out

    ch.g_out_tokens = timed
    t0 = time.process_time()
    tr = gamp.iterate(sgamp.AttentionSteps(ch, X, u, W, np.random.default_rng(seed + 1)), max_iter=iters, damping=0.2,
                      tol=0.0)
    total = time.process_time() - t0
    n = u.shape[0]
    per = 1e3 / (n * len(spent))
    return (sum(spent) * per, total * per, 1e3 * spent[0] / n, 1e3 * spent[-1] / n,
            abs(tr.overlap[-1][0, 0]), abs(tr.overlap[-1][1, 1]))


def gout_cost(c, batch, seed):
    ch = AttentionChannel(2, c)
    rng = np.random.default_rng(seed)
    out = []
    for Q in OVERLAPS.values():
        omega, z, V = draw(Q, batch, rng)
        u = ch.labels_of_z(z)
        ch.g_out_tokens(u[:2], omega[:2], V)
        t = time.process_time()
        ch.g_out_tokens(u, omega, V)
        out.append(1e3 * (time.process_time() - t) / batch)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--d", type=int, default=1000)
    parser.add_argument("--alpha", type=float, default=0.9)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skips", default="1e-4,0.01,0.1,0.5,1")
    parser.add_argument("--batch", type=int, default=1024, help="samples per overlap of the g_out timing")
    parser.add_argument("--no-gout", action="store_true", help="skip the g_out throughput")
    args = parser.parse_args(argv)
    skips = [float(s) for s in args.skips.split(",")]
    harness.print_machine()
    print(f"GAMP d = {args.d}, alpha = {args.alpha}, {args.iters} iterations, seed {args.seed}; CPU ms per "
          "sample-iteration")
    print("| c | channel | whole GAMP | channel, first / last iteration | abs M11, M22 final |")
    print("|---|---|---|---|---|")
    for c in skips:
        ch_ms, all_ms, first, last, m11, m22 = gamp_cost(c, args.d, args.alpha, args.iters, args.seed)
        print(f"| {c:g} | {ch_ms:.3f} | {all_ms:.3f} | {first:.3f} / {last:.3f} | {m11:.3f}, {m22:.3f} |",
              flush=True)
    if args.no_gout:
        return 0
    print(f"\ng_out, CPU ms per sample ({args.batch} model draws per Q, one batched call)")
    print("| c | " + " | ".join(OVERLAPS) + " |")
    print("|---|" + "---|" * len(OVERLAPS))
    for c in skips:
        ms = gout_cost(c, args.batch, args.seed)
        print(f"| {c:g} | " + " | ".join(f"{m:.3f}" for m in ms) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
