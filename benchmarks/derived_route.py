"""The derived route (a channel's and a prior's quantities derived from the likelihood and the density)
against the shipped closed forms, and what it costs.

    python benchmarks/derived_route.py proof      # every shipped glm SE and threshold sweep, derived = true
    python benchmarks/derived_route.py approach   # the noiseless channels through their noisy forms
    python benchmarks/derived_route.py cost       # derived against closed form: SE points and GAMP

`proof` runs each shipped glm sweep of a channel with a finite likelihood (sign; linear at delta > 0 has
none shipped) on its whole grid twice in this process, closed forms and derived, and prints per sweep the
largest difference of each stored number. `approach` runs the noiseless channels' noisy forms y = f(z) +
sqrt(delta) n, derived, at decreasing delta against the closed-form SE of the noiseless channel. `cost`
times one SE point (both starts) and one GAMP run at d = 1000, derived against closed, as medians of
repeats in this process (after a warm-up: the derived route finds a likelihood's structure once per
process), and prints the ratios. Run it on an idle machine; figures in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

import seqphase
from seqphase.core import plugins
from seqphase.core.channel import AbsChannel, LinearChannel, SignChannel, SquareChannel
from seqphase.core.glm import gamp, se, thresholds
from seqphase.core.glm.priors import DerivedPrior, GaussBernoulliPrior, GaussianPrior, RademacherPrior
from seqphase.sweeps.spec import load_sweep


class GaussianNoise(seqphase.Likelihood):
    """y = z + sqrt(delta) n written as a user would: the likelihood and the sampler (labels = None)."""

    def __init__(self, delta=0.5):
        self.delta = delta

    def log_likelihood(self, y, z):
        return -0.5 * (y - z) ** 2 / self.delta - 0.5 * np.log(2 * np.pi * self.delta)

    def sample(self, z, rng):
        return z + np.sqrt(self.delta) * rng.standard_normal(np.shape(z))


def derived(prior, channel):
    return DerivedPrior(prior), plugins.DerivedScalarChannel(channel)


def proof(_args):
    """Each shipped glm SE sweep with a finite likelihood, whole grid, both branches: closed against derived."""
    for name, prior in (("glm-perceptron-se", GaussianPrior()), ("glm-binary-perceptron-se", RademacherPrior())):
        sweep = load_sweep(name)
        alphas = sweep.params["alpha"]
        settings = {k: sweep.settings[k] for k in ("damping", "tol", "max_iter")}
        worst = {key: 0.0 for key in ("mse", "free_entropy", "gen_error")}
        started = time.perf_counter()
        for alpha in alphas:
            a = se.glm_se_branches(prior, SignChannel(), alpha, **settings)
            b = se.glm_se_branches(*derived(prior, SignChannel()), alpha, **settings)
            for branch in ("amp", "informed", "bayes"):
                for key in worst:
                    worst[key] = max(worst[key], abs(getattr(a[branch], key) - getattr(b[branch], key)))
        print(f"{name}: {len(alphas)} points, both starts: largest |closed - derived| "
              + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()) + f"  ({time.perf_counter() - started:.0f} s)")
    prior = RademacherPrior()
    closed = thresholds.perfect_recovery_spinodal(prior, SignChannel())
    other = thresholds.perfect_recovery_spinodal(*derived(prior, SignChannel()))
    print(f"glm-binary-perceptron-thresholds: AMP spinodal closed {closed:.10f}, derived {other:.10f}")


def approach(_args):
    """The noiseless channels' noisy forms, derived, at delta -> 0 against the noiseless closed forms."""
    cases = [("abs", GaussianPrior(), AbsChannel(), (0.6, 1.6)), ("square", GaussianPrior(), SquareChannel(), (0.6, 1.6)),
             ("linear (compressed sensing, rho = 0.5)", GaussBernoulliPrior(0.5), LinearChannel(0.0), (0.5, 0.8))]
    for label, prior, channel, alphas in cases:
        for alpha in alphas:
            target = se.glm_se(prior, channel, alpha).overlap
            gaps = []
            for delta in (1e-1, 1e-2, 1e-3):
                noisy = plugins.DerivedScalarChannel(channel.noisy(delta))
                gaps.append(f"{abs(se.glm_se(prior, noisy, alpha).overlap - target):.2e}")
            print(f"{label}, alpha = {alpha}: overlap {target:.6f}; |gap| at delta = 1e-1, 1e-2, 1e-3: "
                  + ", ".join(gaps))


def _median_time(run, repeats):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def cost(args):
    """Median wall time of one SE point (both starts, alpha = 1, 2, 4 in turn) and of one GAMP run, derived
    against closed."""
    prior = GaussianPrior()
    rows = [("p = 1, discrete y: sign", SignChannel(), plugins.DerivedScalarChannel(SignChannel())),
            ("p = 1, continuous y: y = z + sqrt(0.5) n", LinearChannel(0.5),
             plugins.DerivedScalarChannel(GaussianNoise(0.5))),
            ("p = 1, continuous y: y = z + sqrt(0.01) n", LinearChannel(0.01),
             plugins.DerivedScalarChannel(GaussianNoise(0.01)))]
    print("SE point (both starts), median over alpha = 1, 2, 4 x repeats:")
    for label, closed, user in rows:
        for channel in (closed, user):  # warm-up: structure found, kernels compiled
            se.glm_se_branches(prior, channel, 1.5)

        def point(channel):
            return lambda: [se.glm_se_branches(prior, channel, alpha) for alpha in (1.0, 2.0, 4.0)]

        a, b = _median_time(point(closed), args.repeats) / 3, _median_time(point(user), args.repeats) / 3
        print(f"  {label}: closed {a * 1e3:.1f} ms, derived {b * 1e3:.1f} ms, ratio {b / a:.1f}")
    print("GAMP at d = 1000, alpha = 2, 30 iterations:")
    for label, closed, user in rows[:2]:
        F, x, y = gamp.sample_instance(prior, closed, 2.0, 1000, np.random.default_rng(1))

        def run(channel):
            return lambda: gamp.run_gamp(prior, channel, F, y, x, max_iter=30, tol=0.0, rng=np.random.default_rng(2))

        run(user)()
        a, b = _median_time(run(closed), args.repeats), _median_time(run(user), args.repeats)
        print(f"  {label}: closed {a * 1e3:.0f} ms, derived {b * 1e3:.0f} ms, ratio {b / a:.1f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("proof", "approach", "cost"))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    {"proof": proof, "approach": approach, "cost": cost}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
