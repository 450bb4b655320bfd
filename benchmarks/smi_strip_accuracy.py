"""Accuracy and cost of the small-skip posterior (strip coordinates, c <~ 0.4) against the tests'
independently graded dense grid, optionally beside another version of `core/smi/posterior.py`
(docs/validation/smi.md "Channel accuracy", docs/benchmarks.md).

    python benchmarks/smi_strip_accuracy.py [--skips 0.1,0.01,1e-4] [--before FILE] [--seed 2026]
    # FILE: e.g. git show f36e84a:core/smi/posterior.py > /tmp/posterior_before.py

Samples per skip: 16 model draws at each of Q = diag(0, 0.5), diag(0, 0.9), diag(0.5, 0.99) (V = I - Q +
1e-3 I, omega and z drawn at that overlap) and 48 of GAMP's own channel calls (one instance, d = 250, alpha
= 0.8, the current code, 12 random samples of the calls at iterations 3, 12, 29 and 59). Reference:
`_dense_strip` of tests/smi/test_smi_channel.py (1000^2 cells graded as e = sqrt(c)/2 sinh(s), independent
of the channel's grading). Printed per version: the worst and median error of g and of the 4 x 4
posterior covariance (relative to their largest entry), the samples with g off by more than 1e-3, and the
CPU ms per sample of the GAMP calls (all samples of the four iterations, one thread, compile excluded).
"""

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from seqphase.core import gamp  # noqa: E402
from seqphase.core.smi import gamp as sgamp  # noqa: E402
from seqphase.core.smi import posterior  # noqa: E402
from seqphase.core.smi.channels import AttentionChannel  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ITERATIONS = (3, 12, 29, 59)


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def gamp_calls(channel, rng):
    """(u, omega, V) of GAMP's channel calls at ITERATIONS (d = 250, alpha = 0.8)."""
    calls = []
    inner = channel.g_out_tokens

    def recording(u, omega, V):
        calls.append((u.copy(), omega.copy(), V.copy()))
        return inner(u, omega, V)

    channel.g_out_tokens = recording
    X, W, _, u = sgamp.sample_instance(channel, 0.8, 250, rng)
    gamp.iterate(sgamp.AttentionSteps(channel, X, u, W, rng, n_gen=10), max_iter=max(ITERATIONS) + 1, damping=0.2,
                 tol=0.0)
    channel.g_out_tokens = inner
    return [calls[i] for i in ITERATIONS]


def samples(channel, c, rng):
    out = []
    for Q in (np.diag([0.0, 0.5]), np.diag([0.0, 0.9]), np.diag([0.5, 0.99])):
        V = np.eye(2) - Q + 1e-3 * np.eye(2)
        for _ in range(16):
            om = np.sqrt(np.diag(Q))[:, None] * rng.standard_normal((2, 2))
            z = om + np.sqrt(np.diag(V))[:, None] * rng.standard_normal((2, 2))
            out.append((channel.labels_of_z(z[None])[0], om, V))
    calls = gamp_calls(channel, rng)
    for u, om, V in calls:
        for k in rng.choice(len(u), 12, replace=False):
            out.append((u[k], om[k], V))
    return out, calls


def evaluate(module, u, om, V, c, r):
    sd1 = float(np.sqrt(V[0, 0]))
    rho, B = module.strip_map(c, sd1, r.n0)
    return module.posterior_2layer(np.ascontiguousarray(u), np.ascontiguousarray(om), np.linalg.inv(V), sd1, c,
                                   r.n0, r.neff_strip, r.tol_strip, r.max_level, rho, B)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skips", default="0.1,0.01,1e-4")
    parser.add_argument("--before", default=None, help="another version of core/smi/posterior.py")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))  # the test module's own helpers (smi_checks)
    tests = load(ROOT / "tests" / "smi" / "test_smi_channel.py", "smi_channel_tests")
    versions = {"current": posterior}
    if args.before:
        versions["before"] = load(args.before, "posterior_before")
    rng = np.random.default_rng(args.seed)
    print(f"reference: tests/smi/test_smi_channel.py _dense_strip (1000^2); versions: {', '.join(versions)}")
    print("| c | version | g worst | g median | g > 1e-3 | cov worst | ms a sample (GAMP calls) |")
    print("|---|---|---|---|---|---|---|")
    for c in (float(v) for v in args.skips.split(",")):
        channel = AttentionChannel(2, c)
        r = channel.resolution
        draws, calls = samples(channel, c, rng)
        refs = []
        for u, om, V in draws:
            mean, cov = tests._dense_strip(u, om, V, c)
            refs.append((np.linalg.inv(V) @ (mean.reshape(2, 2) - om), cov))
        for name, module in versions.items():
            eg, ec = [], []
            for (u, om, V), (g_ref, cov_ref) in zip(draws, refs):
                _, mean, second = evaluate(module, u[None], om[None], V, c, r)
                m = mean[0]
                g = np.linalg.inv(V) @ (m.reshape(2, 2) - om)
                eg.append(np.abs(g - g_ref).max() / np.abs(g_ref).max())
                ec.append(np.abs(second[0] - np.outer(m, m) - cov_ref).max() / np.abs(cov_ref).max())
            u, om, V = calls[0]
            evaluate(module, u[:2], om[:2], V, c, r)  # compiled before the clock
            cpu, count = 0.0, 0
            for u, om, V in calls:
                start = time.process_time()
                evaluate(module, u, om, V, c, r)
                cpu += time.process_time() - start
                count += len(u)
            eg, ec = np.array(eg), np.array(ec)
            print(f"| {c:g} | {name} | {eg.max():.1e} | {np.median(eg):.1e} | {int((eg > 1e-3).sum())} of {len(eg)} | "
                  f"{ec.max():.1e} | {1e3 * cpu / count:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
