"""The derived route (a channel's and a prior's quantities derived from the likelihood and the density)
against the shipped closed forms, and what it costs.

    python benchmarks/derived_route.py proof      # every shipped glm SE and threshold sweep, derived = true
    python benchmarks/derived_route.py approach   # the noiseless channels through their noisy forms
    python benchmarks/derived_route.py cost       # derived against closed form: SE points and GAMP
    python benchmarks/derived_route.py cost-p2    # the same for p = 2 (multiindex)
    python benchmarks/derived_route.py grid       # a 4 x 4 SE grid of two continuous user channels

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
import sys
import time

import numpy as np

import seqphase
from harness import median_time, print_machine
from seqphase.core import gamp as loop
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
    proof_multiindex()


def proof_multiindex():
    """The shipped multiindex sweeps' sign(z1 z2) rows (the p = 2 channel with a finite likelihood): the
    isotropic SE that multiindex-gamp stores on its alpha grid, and the multiindex-thresholds point."""
    from seqphase.core.models import get_model
    from seqphase.core.multiindex import se as mse
    from seqphase.core.multiindex.model import ISO_SE, channel_of

    params = {"channel": "sign-z1z2", "p": 0}
    started = time.perf_counter()
    gaps = []
    for alpha in load_sweep("multiindex-gamp").params["alpha"]:
        q = [mse.iso_se(channel_of(params, {"derived": flag}), alpha, **ISO_SE["sign-z1z2"])[0] for flag in (False, True)]
        gaps.append(f"alpha {alpha}: {q[0]:.8f} / {q[1]:.8f}")
    print(f"multiindex-gamp overlap_se, sign(z1 z2), closed / derived: {'; '.join(gaps)}  "
          f"({time.perf_counter() - started:.0f} s)")
    sweep = load_sweep("multiindex-thresholds")
    method = get_model("multiindex").methods["threshold"]
    settings = {**{k: p.default for k, p in method.settings.items()}, **sweep.settings}
    rows = [method.run(params, {**settings, "derived": flag}, np.random.SeedSequence(sweep.seed)) for flag in (False, True)]
    print("multiindex-thresholds, sign(z1 z2), closed / derived: stability "
          f"{rows[0]['alpha_stability'][0]:.10f} / {rows[1]['alpha_stability'][0]:.10f}, bisection "
          f"{rows[0]['alpha_bisection'][0]:.6f} / {rows[1]['alpha_bisection'][0]:.6f} (rtol {settings['rtol']})")


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
    from seqphase.core.multiindex import thresholds as mth
    from seqphase.core.multiindex.channels import make_channel
    from seqphase.core.multiindex.plugin_channel import DerivedVectorChannel

    for name, p in (("z1z2", None), ("norm2", 2)):  # multiindex-thresholds' weak-recovery threshold
        target = mth.easy_threshold(make_channel(name, p))[0]
        gaps = [f"{mth.easy_threshold(DerivedVectorChannel(make_channel(name, p).noisy(delta), name=name))[0] - target:.2e}"
                for delta in (1e-1, 1e-2)]
        print(f"{name}{'' if p is None else f' (p = {p})'}: threshold {target:.6f}; gap at delta = 1e-1, 1e-2: "
              + ", ".join(gaps))


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

        a, b = median_time(point(closed), args.repeats) / 3, median_time(point(user), args.repeats) / 3
        print(f"  {label}: closed {a * 1e3:.1f} ms, derived {b * 1e3:.1f} ms, ratio {b / a:.1f}")
    print("GAMP at d = 1000, alpha = 2, 30 iterations:")
    for label, closed, user in rows[:2]:
        F, x, y = gamp.sample_instance(prior, closed, 2.0, 1000, np.random.default_rng(1))

        def run(channel):
            return lambda: loop.iterate(gamp.GLMSteps(prior, channel, F, y, x, np.random.default_rng(2)), max_iter=30,
                                        tol=0.0)

        run(user)()
        a, b = median_time(run(closed), args.repeats), median_time(run(user), args.repeats)
        print(f"  {label}: closed {a * 1e3:.0f} ms, derived {b * 1e3:.0f} ms, ratio {b / a:.1f}")


class NoisyReLU(seqphase.Likelihood):
    """y = max(z, 0) + sqrt(delta) n: a continuous y with a kink in z."""

    def __init__(self, delta=0.1):
        self.delta = delta

    def log_likelihood(self, y, z):
        return -0.5 * (y - np.maximum(z, 0.0)) ** 2 / self.delta - 0.5 * np.log(2 * np.pi * self.delta)

    def sample(self, z, rng):
        return np.maximum(z, 0.0) + np.sqrt(self.delta) * rng.standard_normal(np.shape(z))


def grid(_args):
    """A 4 x 4 SE grid (alpha = 0.5, 1, 2, 4 x delta = 1, 0.5, 0.1, 0.05, both starts, Gaussian prior) of two
    continuous user channels, derived, against the closed linear channel on the same grid: wall seconds of
    the whole grid in this process (each channel's structure found once, as in a worker)."""
    prior = GaussianPrior()
    alphas, deltas = (0.5, 1.0, 2.0, 4.0), (1.0, 0.5, 0.1, 0.05)
    for label, make in (("linear (closed)", LinearChannel), ("y = z + sqrt(delta) n (derived)",
                                                             lambda d: plugins.DerivedScalarChannel(GaussianNoise(d))),
                        ("y = max(z, 0) + sqrt(delta) n (derived)", lambda d: plugins.DerivedScalarChannel(NoisyReLU(d)))):
        started = time.perf_counter()
        for delta in deltas:
            channel = make(delta)
            for alpha in alphas:
                se.glm_se_branches(prior, channel, alpha)
        print(f"  4 x 4 grid, {label}: {time.perf_counter() - started:.1f} s")


def cost_p2(args):
    """p = 2 (multiindex): one SE point of the se method (both starts, Monte Carlo over common random numbers,
    the spec's 4,000 draws) and one isotropic SE (multiindex-gamp's overlap_se) of sign(z1 z2) at alpha = 3,
    closed against derived = true; and one SE map evaluation (400 draws at Q = 0.3 I) of z1 z2 + sqrt(0.1) n,
    derived, against the closed z1 z2 (the nearest closed form: the noiseless channel)."""
    from seqphase.core.models import get_model
    from seqphase.core.multiindex import se as mse
    from seqphase.core.multiindex.channels import make_channel
    from seqphase.core.multiindex.model import ISO_SE, channel_of
    from seqphase.core.multiindex.plugin_channel import DerivedVectorChannel

    method = get_model("multiindex").methods["se"]
    settings = {key: param.default for key, param in method.settings.items()}
    params = {"channel": "sign-z1z2", "p": 0, "alpha": 3.0}

    def se_point(derived):
        return lambda: method.run(params, {**settings, "derived": derived}, np.random.SeedSequence(8))

    def iso(derived):
        channel = channel_of(params, {"derived": derived})
        return lambda: mse.iso_se(channel, 3.0, **ISO_SE["sign-z1z2"])

    for label, make in (("se point (4,000 draws, both starts)", se_point), ("isotropic SE", iso)):
        a, b = median_time(make(False), args.repeats), median_time(make(True), args.repeats)
        print(f"  p = 2, discrete y: sign(z1 z2), {label}: closed {a:.2f} s, derived {b:.2f} s, ratio {b / a:.1f}")
    closed = make_channel("z1z2")
    noisy = DerivedVectorChannel(make_channel("z1z2").noisy(0.1), name="z1z2-noisy")

    def step(channel):
        expect = mse.Expectation(channel, "mc", n_mc=400, rng=np.random.default_rng(8))
        return lambda: expect(0.3 * np.eye(2))

    a, b = median_time(step(closed), args.repeats), median_time(step(noisy), args.repeats)
    print(f"  p = 2, continuous y: z1 z2 + sqrt(0.1) n, SE map (400 draws): closed z1 z2 {a:.3f} s, "
          f"derived {b:.2f} s, ratio {b / a:.0f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("proof", "approach", "cost", "cost-p2", "grid"))
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print_machine()
    {"proof": proof, "approach": approach, "cost": cost, "cost-p2": cost_p2, "grid": grid}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
