"""What a derived channel costs: the SE and one GAMP instance of a user channel written as likelihood and
sampler only (core/plugins.py derives everything by quadrature) against the same channel with closed
forms, and a user re-implementation of the shipped sign channel against the shipped one.

    python benchmarks/plugin_cost.py [--repeat 3] [--family glm|multiindex|all] [--n-mc 400] [--steps 5]

Each SE is `glm_se` from the uninformed start (CPU time, time.process_time, best of --repeat, the closed
form's and the derived channel's repeats interleaved; the derived channel's likelihood features are found
and its compiled loop loaded (numba) before timing, as a sweep's workers do once per process). Prints one
row per (channel, alpha): the CPU seconds of the closed form and of the derived channel, their ratio, and
the largest difference of the overlaps. The user channels are those of tests/userplugins.py.

Multi-index (p = 2): the SE map of the Monte-Carlo engine (`se.mi_se`, `--steps` iterations from Q0 = 0.3 I,
tolerance 0 so both channels do the same work, `--n-mc` samples), CPU seconds of the shipped channel
against the user re-implementation derived by quadrature (core/multiindex/plugin_channel.py), their
ratio and the largest difference of the overlaps: sign(z1 z2) (the exact re-implementation) and, for
z1 z2, the user's y = z1 z2 + sqrt(delta) n at delta = 0.01 (not the same channel: the cost only).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def cpu(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        value = fn()
        best = min(best, time.process_time() - started)
    return best, value


def cpu_pair(first, second, repeat):
    """`cpu` of two functions with their repeats interleaved, so that a change of the machine's load
    during the measurement weighs on both alike."""
    best, values = [float("inf")] * 2, [None] * 2
    for _ in range(repeat):
        for i, fn in enumerate((first, second)):
            started = time.process_time()
            values[i] = fn()
            best[i] = min(best[i], time.process_time() - started)
    return (best[0], values[0]), (best[1], values[1])


def multiindex_rows(args):
    import numpy as np

    import userplugins
    from seqphase.core.multiindex import se
    from seqphase.core.multiindex.channels import make_channel
    from seqphase.core.multiindex.plugin_channel import DerivedVectorChannel

    pairs = [("sign-z1z2", "SignProduct", userplugins.SignProduct()),
             ("z1z2", "NoisyProduct delta=0.01", userplugins.NoisyProduct(0.01))]
    print(f"{'shipped':10s} {'user (derived)':24s} {'alpha':>5s} {'shipped s':>9s} {'derived s':>9s} {'ratio':>6s} "
          f"{'|d overlap|':>11s}")
    for shipped_name, user_name, plugin in pairs:
        shipped, derived = make_channel(shipped_name), DerivedVectorChannel(plugin, name=user_name)
        for alpha in (1.0, 3.0):
            def run(channel):
                expect = se.Expectation(channel, "mc", n_mc=args.n_mc, rng=np.random.default_rng(0))
                return se.mi_se(channel, alpha, Q0=0.3 * np.eye(2), tol=0.0, max_iter=args.steps, expect=expect)

            t_shipped, a = cpu(lambda: run(shipped), args.repeat)
            t_derived, b = cpu(lambda: run(derived), 1)
            print(f"{shipped_name:10s} {user_name:24s} {alpha:5.1f} {t_shipped:9.3f} {t_derived:9.3f} "
                  f"{t_derived / t_shipped:6.0f} {np.abs(a.Q - b.Q).max():11.1e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--family", choices=("glm", "multiindex", "all"), default="all")
    parser.add_argument("--n-mc", type=int, default=400, help="multi-index SE samples")
    parser.add_argument("--steps", type=int, default=5, help="multi-index SE iterations")
    args = parser.parse_args(argv)
    if args.family in ("multiindex", "all"):
        multiindex_rows(args)
    if args.family == "multiindex":
        return

    import numpy as np

    from seqphase.core import gamp as loop
    from seqphase.core.glm import gamp, se
    from seqphase.core.glm.model import build

    pairs = [("sign (shipped)", "sign", "userplugins:Sign", {}),
             ("probit delta=0.1 (closed forms)", "userplugins:ClosedProbit", "userplugins:Probit", {"delta": 0.1})]
    print(f"{'channel':34s} {'alpha':>5s} {'closed s':>9s} {'derived s':>9s} {'ratio':>6s} {'|d overlap|':>11s}")
    for label, closed_name, derived_name, extra in pairs:
        prior, closed = build({"prior": "gaussian", "channel": closed_name, "rho": 1.0, "delta": 0.0, **extra})
        _, derived = build({"prior": "gaussian", "channel": derived_name, "rho": 1.0, "delta": 0.0, **extra})
        derived.feature_edges()  # the likelihood's structure: found once per process (cached across works)
        derived.label_table(np.zeros(1), 1.0)  # and the compiled window sums loaded (numba cache), once per process
        for alpha in (0.5, 2.0, 5.0):
            (t_closed, a), (t_derived, b) = cpu_pair(lambda: se.glm_se(prior, closed, alpha),
                                                     lambda: se.glm_se(prior, derived, alpha), args.repeat)
            print(f"{label:34s} {alpha:5.1f} {t_closed:9.4f} {t_derived:9.4f} {t_derived / t_closed:6.1f} "
                  f"{abs(a.overlap - b.overlap):11.1e}")
        rng = np.random.default_rng(0)
        F, x, y = gamp.sample_instance(prior, closed, 2.0, 1000, rng)
        t_closed, _ = cpu(lambda: loop.iterate(gamp.GLMSteps(prior, closed, F, y, x, np.random.default_rng(1)),
                                               max_iter=20, tol=0.0), 1)
        t_derived, _ = cpu(lambda: loop.iterate(gamp.GLMSteps(prior, derived, F, y, x, np.random.default_rng(1)),
                                                max_iter=20, tol=0.0), 1)
        print(f"{label:34s} GAMP d=1000 alpha=2, 20 iterations: closed {t_closed:.2f} s, derived {t_derived:.2f} s "
              f"({t_derived / t_closed:.0f}x)")


if __name__ == "__main__":
    main()
