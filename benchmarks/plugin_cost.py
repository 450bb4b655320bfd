"""What a derived channel costs: the SE and one GAMP instance of a user channel written as likelihood and
sampler only (core/plugins.py derives everything by quadrature) against the same channel with closed
forms, and a user re-implementation of the shipped sign channel against the shipped one.

    python benchmarks/plugin_cost.py [--repeat 3]

Each SE is `glm_se` from the uninformed start (CPU time, time.process_time, best of --repeat; the
derived channel's cached quadrature panels are built before timing, as a sweep's workers build them
once per process). Prints one row per (channel, alpha): the CPU seconds of the closed form and of the derived
channel, their ratio, and the largest difference of the overlaps. The user channels are those of
tests/userplugins.py.
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    import numpy as np

    from seqphase.core.glm import gamp, se
    from seqphase.core.glm.model import build

    pairs = [("sign (shipped)", "sign", "userplugins:Sign", {}),
             ("probit delta=0.1 (closed forms)", "userplugins:ClosedProbit", "userplugins:Probit", {"delta": 0.1})]
    print(f"{'channel':34s} {'alpha':>5s} {'closed s':>9s} {'derived s':>9s} {'ratio':>6s} {'|d overlap|':>11s}")
    for label, closed_name, derived_name, extra in pairs:
        prior, closed = build({"prior": "gaussian", "channel": closed_name, "rho": 1.0, "delta": 0.0, **extra})
        _, derived = build({"prior": "gaussian", "channel": derived_name, "rho": 1.0, "delta": 0.0, **extra})
        derived.feature_edges()  # the likelihood's structure: found once per process (cached across works)
        for alpha in (0.5, 2.0, 5.0):
            t_closed, a = cpu(lambda: se.glm_se(prior, closed, alpha), args.repeat)
            t_derived, b = cpu(lambda: se.glm_se(prior, derived, alpha), args.repeat)
            print(f"{label:34s} {alpha:5.1f} {t_closed:9.4f} {t_derived:9.4f} {t_derived / t_closed:6.0f} "
                  f"{abs(a.overlap - b.overlap):11.1e}")
        rng = np.random.default_rng(0)
        F, x, y = gamp.sample_instance(prior, closed, 2.0, 1000, rng)
        t_closed, _ = cpu(lambda: gamp.run_gamp(prior, closed, F, y, x, max_iter=20, tol=0.0,
                                                rng=np.random.default_rng(1)), 1)
        t_derived, _ = cpu(lambda: gamp.run_gamp(prior, derived, F, y, x, max_iter=20, tol=0.0,
                                                 rng=np.random.default_rng(1)), 1)
        print(f"{label:34s} GAMP d=1000 alpha=2, 20 iterations: closed {t_closed:.2f} s, derived {t_derived:.2f} s "
              f"({t_derived / t_closed:.0f}x)")


if __name__ == "__main__":
    main()
