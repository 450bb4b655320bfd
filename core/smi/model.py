"""Deep tied attention as a sequence multi-index model (registry name "smi"; spec smi.md).

Parameters: `skip` (c > 0, the skip strength of the non-final layers), `depth` (2 or 3; 3 layers for the
"se" method only: its posterior is the importance sampler of `core/smi/posterior3.py`), `alpha` (> 0; not
for threshold sweeps). Layer x layer results have rows/cols 1..3 whatever the depth (NaN beyond it).

Methods:
- "se": the Bayes-optimal SE (`core/smi/se.py`) from Q0 = q0 I (reference: 0.05 I, eps = 1e-3), with
  the per-iteration Q log, and both test errors at the fixed point: `gen_error_plugin` (the student's
  index is omega; what the published CSVs contain) and `gen_error_bayes` (posterior-mean predictor),
  each with its Monte Carlo standard error.
- "threshold": alpha_2 = 1/K22 (stability, F map at Q = 0) and by SE bisection; alpha_1 by the staircase
  (alpha K11(q*(alpha)) = 1) and by SE bisection (`core/smi/thresholds.py`), a point as a graph of works
  (`Method.tasks`: Monte Carlo blocks, routes side by side, root searches in rounds of k probes).
- "gamp": GAMP (`core/smi/gamp.py`, spec §4) on `n_seeds` instances of dimension d: per seed and
  iteration M = W_hat W*^T / d (`overlap`), W_hat W_hat^T / d, the plug-in test error on n_gen fresh
  sequences; `damping` is the weight of the OLD iterate (the reference's delta = 0.8 on the new one is
  damping = 0.2, the default). Runs that stop early (tol) are NaN after their last iteration; the
  `*_final` variables hold each seed's last iterate.
- "sgd": the layer-wise SGD experiment (`core/smi/sgd.py`), `n_runs` runs from one teacher and one
  student initialisation (as in the paper), fresh data per run.

Each method is a `Method` subclass below (layout, run, and its figure from `core/smi/figures.py`);
`SMIModel` only declares the parameters, the methods and the depth check.
"""

from __future__ import annotations

import numpy as np

from seqphase.core import gamp, onset
from seqphase.core.errors import ParameterError
from seqphase.core.models import REQUIRED, Layout, Method, Model, Param, SeededMethod, Variable, children
from seqphase.core.numerics import pad_matrix
from seqphase.core.search import K_SETTING
from seqphase.core.smi import figures
from seqphase.core.smi import gamp as sgamp
from seqphase.core.smi import se as sse
from seqphase.core.smi import sgd as ssgd
from seqphase.core.smi import thresholds as sth
from seqphase.core.smi.channels import RESOLUTIONS, AttentionChannel


def _f(name, doc, default, low=None, high=None, low_inclusive=False, high_inclusive=True):
    return Param(name, "float", doc, default, low=low, high=high, low_inclusive=low_inclusive,
                 high_inclusive=high_inclusive)


def _i(name, doc, default, low=1, high=10**7):
    return Param(name, "int", doc, default, low=low, high=high, low_inclusive=True)


_SE = {
    "n_mc": _i("n_mc", "quasi-Monte Carlo points per SE iteration (rounded up to a power of 2)", 2048, 64),
    "q0": _f("q0", "initial overlap Q0 = q0 I (reference code: 0.05)", 0.05, 0.0, 1.0),
    "eps": _f("eps", "regulariser added to V = I - Q (reference code: 1e-3)", 1e-3, 0.0, 0.1, True),
    "damping": _f("damping", "weight of the old iterate (reference code: 0.2)", 0.0, 0.0, 1.0, True, False),
    "side_info": _f("side_info", "side-information SNR lambda", 0.0, 0.0, 1.0, True),
    "tol": _f("tol", "stop when max |change of Q| < tol", 1e-5, 0.0, 1e-2),
    "max_iter": _i("max_iter", "SE iteration cap", 300),
    "coarse": _i("coarse", "k: the transient runs on n_mc / k of the points first, then all of them "
                 "(1: off; same fixed point to tol, core/smi/se.py)", 8, 1, 64),
    "n_error": _i("n_error", "Monte Carlo draws of the plug-in error (Bayes error: n_error / 5)", 100_000, 1000),
    "anderson": _i("anderson", "pairs of Anderson's multisecant extrapolation next to a stable fixed point, and "
                   "a secant along a growing layer's overlap (0: off; same fixed point to tol, core/smi/se.py)",
                   3, 0, 10),
    "newton": Param("newton", "bool", "quasi-Newton steps on the learned entries in the fine stage, from the coarse "
                    "map's Jacobian (Broyden-updated; same fixed point to tol, core/smi/se.py)", True),
}
_THR = {
    "n_k": _i("n_k", "quasi-Monte Carlo points of both routes (rounded up to a power of 2): the stability "
              "route averages all of them, the SE-map route iterates on the first n_mc; the scatter of "
              "alpha_2 over Sobol scrambles is ~0.15% at 32768", 32768, 256),
    "n_mc": _i("n_mc", "draws of the SE-map route: the first n_mc of the n_k points (rounded up to a power of "
               "2), each iterated twice (ring_pairs), so it costs as many posterior passes as the stability "
               "route and shares its draws", 16384, 64),
    "k_coarse": _i("k_coarse", "points of the coarse alpha_1 search (0: one stage)", 4096, 0),
    "eps": _f("eps", "regulariser added to V = I - Q", 1e-3, 0.0, 0.1, True),
    "alpha_hi": _f("alpha_hi", "largest alpha searched for alpha_1 (> 1/6: no threshold of this model lies "
                   "below 1/6)", 4.0, 0.0),
    "rtol": _f("rtol", "relative width at which the root searches stop", 2e-3, 0.0, 0.1),
    "delta": _f("delta", "size of the perturbation whose growth the SE-map route follows", 1e-6, 0.0, 1e-3),
    "n_steps": _i("n_steps", "SE iterations of the SE-map route per alpha (the growth over the last)", 2, 1, 50),
    "bisection": Param("bisection", "bool", "also locate both thresholds by the SE map's growth rate", True),
    "k": K_SETTING,
    "block": _i("block", "posterior evaluations per work (a power of 2) where the posterior uses its plain grid "
                "(c >~ 0.4: ~0.1 ms each, ~0.5 s a work)", 4096, 64, 1 << 20),
    "block_strip": _i("block_strip", "posterior evaluations per work (a power of 2) where it uses strip "
                      "coordinates (small skips: 1-6 ms each, ~1-2 s a work)", 512, 64, 1 << 20),
}
_GAMP = {
    "d": _i("d", "input dimension (reference: 1000)", 1000, 20),
    "n_seeds": _i("n_seeds", "instances per point (teacher, data, initialisation and test set each)", 16),
    "max_iter": _i("max_iter", "GAMP iterations (reference: 50)", 50, 1, 10_000),
    "damping": _f("damping", "weight of the OLD iterate (reference: delta = 0.8 on the new one, i.e. 0.2)",
                  0.2, 0.0, 1.0, True, False),
    "tol": _f("tol", "stop when W_hat moves less than tol (rms per entry); 0: always max_iter", 1e-6, 0.0, 0.1,
              True),
    "side_info": _f("side_info", "side-information SNR lambda (spec §4.3)", 0.0, 0.0, 1.0, True),
    "n_gen": _i("n_gen", "fresh test sequences of the plug-in error (reference: 1000)", 1000, 10),
    "init": Param("init", "choice", "W_hat^0: 'random' N(0, 1) (reference), 'small' 1e-3 N(0, 1)", "random",
                  choices=tuple(sgamp.INIT_SCALES)),
    "eps": _f("eps", "regulariser added to the cavity covariance V = C_hat + eps I (reference: 1e-3)", 1e-3,
              0.0, 0.1, True),
    "noise": _f("noise", "variance of Gaussian noise on the teacher's indices (0: noiseless, as the paper; "
                "= eps: the teacher of the SE with that eps)", 0.0, 0.0, 1.0, True),
}
# the onset method: GAMP's own settings (without d, n_seeds and the plug-in error's test set), more
# iterations than the reference's 50 (next to an onset the overlap grows slowly: critical slowing down)
_ONSET = {**onset.ONSET_SETTINGS, **onset.window_settings("alpha2", 0.1, 0.5, 9),
          **onset.window_settings("alpha1", 0.5, 1.1, 7),
          **{k: v for k, v in _GAMP.items() if k not in ("d", "n_seeds", "n_gen")},
          "max_iter": _i("max_iter", "GAMP iterations at most (stops earlier at tol)", 150, 1, 10_000),
          # the SE's grid errs by < 1e-3 of the posterior sd at 2-3x the cost of one whose errors stay below 2%
          # of it on GAMP's own calls (channels.RESOLUTIONS; docs/validation/smi.md)
          "posterior": Param("posterior", "choice", "the posterior's grid: 'coarse' (strip-grid tolerance 1e-2, "
                             "weights below e^-50 of the peak dropped, level-0 strip cells 1.25 wide) or 'fine' "
                             "(the SE's)", "coarse", choices=tuple(RESOLUTIONS)),
          # the precision of the 16-seed grid design at c = 0.1 (docs/validation/smi.md, Thresholds by GAMP)
          **onset.design_settings({"alpha2": 0.019, "alpha1": 0.024})}
_SGD = {
    "alpha": _f("alpha", "sample complexity n/d of the training set (paper: 15)", 15.0, 0.0),
    "d": _i("d", "input dimension", 500, 4),
    "n_runs": _i("n_runs", "runs (fresh data each, same teacher and init)", 8),
    "epochs": _i("epochs", "epochs (paper: 1700)", 1700),
    "batch_size": _i("batch_size", "batch size", 200),
    "n_passes": _i("n_passes", "SGD steps per batch", 3),
    "lr": _f("lr", "learning rate", 15.0, 0.0),
    "weight_decay_d": _f("weight_decay_d", "weight decay times d (paper: 0.07)", 0.07, 0.0, None, True),
    "init_scale": _f("init_scale", "student init N(0, init_scale^2)", 0.9, 0.0),
    "n_test": _i("n_test", "test samples", 2000),
    "log_every": _i("log_every", "batches between logs (38 = once an epoch at d = 500, alpha = 15)", 38),
    "test_every": _i("test_every", "epochs between test errors", 20),
}


MAX_DEPTH = 3


def _pad(a):
    """NaN-pad the trailing (p, p) to (MAX_DEPTH, MAX_DEPTH): one layout for every depth (depth is a point
    parameter, the layout cannot see it), so a 2-layer point has NaN in row/col 3."""
    return pad_matrix(a, MAX_DEPTH)


def _layer_dims():
    return {"row": np.arange(1, MAX_DEPTH + 1), "col": np.arange(1, MAX_DEPTH + 1)}


def _channel(params, resolution=None):
    return AttentionChannel(int(params.get("depth", 2)), params["skip"], resolution)


class SE(Method):
    """Bayes-optimal SE from Q0 = q0 I, its per-iteration log and both test errors at the fixed point."""

    def layout(self, settings):
        dims = dict(_layer_dims(), se_iteration=np.arange(settings["max_iter"] + 1))
        return Layout(dims, {
            "overlap": Variable(("row", "col"), "f8", "SE fixed point Q (layers x layers)"),
            "overlap_hat": Variable(("row", "col"), "f8", "Qhat at the fixed point"),
            "history": Variable(("se_iteration", "row", "col"), "f8", "Q per iteration (NaN after the end)"),
            "n_iter": Variable((), "i4", "SE iterations run"),
            "n_iter_coarse": Variable((), "i4", "of which on the coarse point set (method.coarse)"),
            "converged": Variable((), "i1", "1 if the SE met its tolerance"),
            "gen_error_plugin": Variable((), "f8", "plug-in test error E||g(z) - g(omega)||_F^2"),
            "gen_error_plugin_se": Variable((), "f8", "its Monte Carlo standard error"),
            "gen_error_bayes": Variable((), "f8", "Bayes-optimal test error (posterior-mean predictor)"),
            "gen_error_bayes_se": Variable((), "f8", "its Monte Carlo standard error"),
            "gen_error_plugin_last_layer": Variable((), "f8", "plug-in error with only the last layer's overlap kept"),
        })

    def run(self, params, settings, seed_sequence):
        ch, alpha, s = _channel(params), params["alpha"], settings
        k_draws, k_plug, k_bayes, k_last = seed_sequence.spawn(4)
        draws = sse.Draws(ch.p, ch.T, s["n_mc"], np.random.default_rng(k_draws))
        st = sse.smi_se(ch, alpha, draws, Q0=s["q0"] * np.eye(ch.p), side_info=s["side_info"],
                        damping=s["damping"], tol=s["tol"], max_iter=s["max_iter"], eps=s["eps"],
                        coarse=s["coarse"], anderson=s["anderson"], newton=s["newton"])
        hist = np.full((s["max_iter"] + 1, MAX_DEPTH, MAX_DEPTH), np.nan)
        k = min(len(st.history), s["max_iter"] + 1)
        hist[:k] = _pad(st.history[:k])
        plug, plug_se = sse.gen_error_plugin(ch, st.Q, s["n_error"], np.random.default_rng(k_plug))
        bayes, bayes_se = sse.gen_error_bayes(ch, st.Q, max(200, s["n_error"] // 5), rng=np.random.default_rng(k_bayes))
        last = np.zeros_like(st.Q)
        last[-1, -1] = st.Q[-1, -1]
        plug_last, _ = sse.gen_error_plugin(ch, last, s["n_error"], np.random.default_rng(k_last))
        return {"overlap": _pad(st.Q), "overlap_hat": _pad(st.Qhat), "history": hist, "n_iter": st.n_iter,
                "n_iter_coarse": st.n_coarse,
                "converged": int(st.converged), "gen_error_plugin": plug, "gen_error_plugin_se": plug_se,
                "gen_error_bayes": bayes, "gen_error_bayes_se": bayes_se, "gen_error_plugin_last_layer": plug_last}

    def figure(self, plt, ds, companions):
        return figures.plot_se(plt, ds, companions)


def gamp_instance(params, settings, alpha, d, stream, n_gen, resolution=None, stop=None):
    """GAMP on one instance drawn from `stream` (the gamp and onset methods' instance): (trace, teacher W*).
    The stream draws the instance, then the run's n_gen test sequences, initialisation and side information.
    `resolution` replaces the channel's default grid settings (a check of the posterior's numerics only);
    `stop` is the onset's stopping rule (`core/gamp.py`, `iterate(stop=...)`), None for a run to tol or cap."""
    s = settings
    ch = _channel(params, resolution)
    rng = np.random.default_rng(stream)
    X, W, _, u = sgamp.sample_instance(ch, alpha, d, rng, noise=s["noise"])
    steps = sgamp.AttentionSteps(ch, X, u, W, rng, side_info=s["side_info"], init=s["init"], n_gen=n_gen, eps=s["eps"])
    return gamp.iterate(steps, max_iter=s["max_iter"], damping=s["damping"], tol=s["tol"], stop=stop), W


class GAMP(SeededMethod):
    """GAMP on `n_seeds` instances of dimension d, per seed and iteration."""

    def layout(self, settings):
        dims = dict(seed=np.arange(settings["n_seeds"]), iteration=np.arange(settings["max_iter"] + 1),
                    **_layer_dims())
        t, m = ("seed", "iteration"), ("row", "col")
        return Layout(dims, {
            "overlap": Variable(t + m, "f8", "M = W_hat W*^T / d per iteration (0 = initialisation; NaN after "
                                             "the run stops)"),
            "self_overlap": Variable(t + m, "f8", "Q = W_hat W_hat^T / d per iteration"),
            "gen_error_plugin": Variable(t, "f8", "plug-in test error mean ||g(W* x) - g(W_hat x)||_F^2 on "
                                                  "n_gen fresh sequences"),
            "overlap_final": Variable(("seed",) + m, "f8", "M at the last iteration, each student row's sign "
                                                           "set so that M_ll >= 0 (g is even in each "
                                                           "layer's index): |M_ll| on the diagonal"),
            "self_overlap_final": Variable(("seed",) + m, "f8", "self_overlap at the last iteration"),
            "gen_error_plugin_final": Variable(("seed",), "f8", "plug-in test error at the last iteration"),
            "teacher_overlap": Variable(("seed",) + m, "f8", "W* W*^T / d (M_ll / teacher_ll: overlap per "
                                                             "unit teacher norm)"),
            "n_iter": Variable(("seed",), "i4", "iterations run"),
            "converged": Variable(("seed",), "i1", "1 if W_hat moved less than tol"),
            "diverged": Variable(("seed",), "i1", "1 if the estimate became non-finite (run stopped)"),
            "n_clipped": Variable(("seed",), "i4", "iterations whose A had a negative eigenvalue (set to 0)"),
        })

    def run_seed(self, params, settings, stream):
        alpha, s = params["alpha"], settings
        if round(alpha * s["d"]) < 1:
            raise ParameterError("method.d", f"alpha d = {alpha * s['d']:g} gives no sample", "raise d or alpha")
        K, P = s["max_iter"] + 1, MAX_DEPTH
        out = {k: np.full((K, P, P), np.nan) for k in ("overlap", "self_overlap")}
        out["gen_error_plugin"] = np.full(K, np.nan)
        # layer x layer results NaN-padded to MAX_DEPTH rows (`_pad`)
        tr, W = gamp_instance(params, s, alpha, s["d"], stream, s["n_gen"])
        k = tr.overlap.shape[0]
        out["overlap"][:k] = _pad(tr.overlap)
        sign = np.where(np.diag(tr.overlap[-1]) < 0, -1.0, 1.0)
        out["overlap_final"] = _pad(sign[:, None] * tr.overlap[-1])
        out["self_overlap"][:k] = _pad(tr.self_overlap)
        out["gen_error_plugin"][:k] = tr.gen_error
        out["teacher_overlap"] = _pad(W @ W.T / s["d"])
        out["n_iter"], out["converged"] = tr.n_iter, int(tr.converged)
        out["diverged"], out["n_clipped"] = int(tr.diverged), tr.n_clipped
        out["self_overlap_final"] = out["self_overlap"][tr.n_iter]
        out["gen_error_plugin_final"] = out["gen_error_plugin"][tr.n_iter]
        return out

    def figure(self, plt, ds, companions):
        return figures.plot_gamp(plt, ds, companions)


class Threshold(Method):
    """alpha_2 and alpha_1, each two ways on one point set (`core/smi/thresholds.py`; the routes of version
    5, computed as a graph of works since version 6):
    stability (the Perron value of the linearisation: 1/K22 at Q = 0; alpha K11(q*) = 1 on the layer-2
    fixed-point curve) and the SE map (the growth factor of a small perturbation under the full SE
    iteration, = 1 at the threshold; stored under *_bisection, with its final bracket)."""

    SKIP_RANGE = (1e-4, 100.0)  # the posterior is validated on [1e-4, 8] and K22 at c = 100 (spec §5.3)

    def check(self, params, settings):
        lo, hi = self.SKIP_RANGE
        c = params.get("skip")
        if c is not None and not lo <= c <= hi:
            raise ParameterError("params.skip", f"skip = {c:g} is outside the range where the threshold "
                                 f"posterior is validated, [{lo:g}, {hi:g}]", f"use a skip in [{lo:g}, {hi:g}]")
        if settings["n_mc"] > settings["n_k"]:
            raise ParameterError("method.n_mc", f"n_mc = {settings['n_mc']} exceeds n_k = {settings['n_k']}: the "
                                 "SE-map route runs on the first n_mc of the n_k points", "set n_mc <= n_k")
        for name in ("block", "block_strip"):
            size = settings[name]
            if size & (size - 1):
                raise ParameterError(f"method.{name}", f"{name} = {size} is not a power of 2: blocks must tile the "
                                     "Sobol point set (2^m points) and start at multiples of their size",
                                     f"use a power of 2, e.g. {1 << size.bit_length()}")
        if settings["alpha_hi"] <= 1.0 / 6.0:
            raise ParameterError("method.alpha_hi", f"alpha_hi = {settings['alpha_hi']:g} brackets no transition: "
                                 "every threshold of this model is >= 1/6 (K <= T(T+1) = 6)",
                                 "set alpha_hi above 1/6 (default 4)")

    def layout(self, settings):
        v = {k: Variable((), "f8", doc) for k, doc in (
            ("alpha2_stability", "last layer: 1 / Perron value of the Q = 0 linearisation"),
            ("alpha2_stability_se", "its Monte Carlo standard error (iid formula from that of K22; the "
                                    "scatter over Sobol scrambles is ~10x smaller)"),
            ("alpha2_bisection", "last layer: the SE map's growth rate = 1 (root, log-interpolated)"),
            ("alpha2_bisection_lo", "its bracket: the SE map's perturbation decays here"),
            ("alpha2_bisection_hi", "its bracket: the SE map's perturbation grows here"),
            ("alpha1_stability", "first layer: alpha K11(q*(alpha)) = 1 on the layer-2 fixed-point curve"),
            ("alpha1_stability_se", "its Monte Carlo standard error (from that of K11)"),
            ("alpha1_bisection", "first layer: growth rate = 1 of Q11 under the SE map at its layer-2 fixed point"),
            ("alpha1_bisection_lo", "its bracket: Q11 decays here"),
            ("alpha1_bisection_hi", "its bracket: Q11 grows here"),
            ("k22", "K22 = E||Cov(z2 | Y) - I||^2 at Q = 0"),
            ("k11_at_zero", "K11 at Q = 0"),
            ("q_star_at_alpha1", "layer-2 overlap q*(alpha_1)"),
        )}
        v["note"] = Variable((), "U200", "why a route is inf or NaN ('' when every route is a root)")
        return Layout({}, v)

    def tasks(self, params, settings, seed_sequence):
        """The point as a graph of works (`sth.point_tasks`): posterior passes cut into blocks, the routes
        side by side, root searches in rounds of k probes."""
        return sth.point_tasks(_channel(params), settings, seed_sequence)

    def figure(self, plt, ds, companions):
        return figures.plot_thresholds(plt, ds, companions)


class SGD(SeededMethod):
    """The layer-wise SGD experiment: `n_runs` runs from one teacher and one student initialisation."""

    def layout(self, settings):
        n_log = ssgd.n_logs(settings["d"], settings["alpha"], settings["epochs"], settings["batch_size"],
                            settings["log_every"])
        n_test = ssgd.n_tests(settings["epochs"], settings["test_every"])
        dims = {"seed": np.arange(settings["n_runs"]), "log": np.arange(n_log), "test": np.arange(n_test),
                "layer": np.arange(1, 3)}
        return Layout(dims, {
            "cosine": Variable(("seed", "log", "layer"), "f8", "M_l / sqrt(q_l) (the paper's cosine)"),
            "cosine_normalised": Variable(("seed", "log", "layer"), "f8", "M_l / sqrt(q_l |w_l|^2 / d)"),
            "log_epoch": Variable(("log",), "f8", "epoch of each log"),
            "test_mse": Variable(("seed", "test"), "f8", "test mean squared error"),
            "test_epoch": Variable(("test",), "f8", "epoch of each test error"),
            "teacher_overlap": Variable((), "f8", "w1 . w2 / d of the teacher"),
        })

    seeds = "n_runs"

    def seed_streams(self, seed_sequence, n):
        # children (teacher, init, data) of the point; run i draws its data from child i of `data`
        k_teacher, k_init, k_data = children(seed_sequence, 3)
        return [(k_teacher, k_init, child) for child in children(k_data, n)]

    def run_seed(self, params, settings, stream):
        s = settings
        k_teacher, k_init, k_data = stream
        # log_epoch, test_epoch and teacher_overlap (no seed dim) are the same in every run: seed 0's are stored
        return ssgd.run_sgd(
            d=s["d"], alpha=s["alpha"], skip=params["skip"], epochs=s["epochs"],
            rng_teacher=np.random.default_rng(k_teacher), rng_data=np.random.default_rng(k_data),
            rng_init=np.random.default_rng(k_init), batch_size=s["batch_size"], n_passes=s["n_passes"],
            lr=s["lr"], weight_decay=s["weight_decay_d"] / s["d"], init_scale=s["init_scale"],
            n_test=s["n_test"], log_every=s["log_every"], test_every=s["test_every"])

    def figure(self, plt, ds, companions):
        return figures.plot_sgd(plt, ds, companions)


class Onset(onset.OnsetMethod):
    """alpha_2 and alpha_1 by GAMP at several sizes (core/onset.py): the final |M22| and |M11| (raw overlaps
    W_hat W*^T / d, each row's sign set so that M_ll >= 0) of each instance."""

    observables = ("overlap_1", "overlap_2")
    transitions = {"alpha2": "overlap_2", "alpha1": "overlap_1"}

    def trace(self, params, settings, alpha, d, stream, resolution=None, watch=None):
        """GAMP's whole trace on one instance (overlaps per iteration): what `run_instance` reads its final
        overlaps off, and what a rerun to another cap continues (benchmarks/smi_onset.py cap; its
        `--tol-strip` passes a `resolution` other than the settings', the sweep never does). Without one the
        posterior runs on the settings' grid (`posterior`, channels.RESOLUTIONS).
        `watch` (the observable the instance's transition reads, "overlap_1" or "overlap_2"): the stopping
        rule (core/onset.py, `stop_test`, on every layer) applies when the settings' stop_window is > 0;
        None: no early stop."""
        stop = None
        if watch is not None and settings.get("stop_window", 0) > 0:
            stop = onset.stop_test(d, level=settings["level"],
                                   fraction=settings["stop_fraction"], cap=settings["max_iter"],
                                   window=settings["stop_window"], flat=settings["stop_flat"],
                                   # settings stored before onset version 8 have no envelope: the raw values
                                   envelope=settings.get("stop_envelope", 1))
        if resolution is None:
            # settings stored before onset version 6 have no `posterior`: they ran on the SE's grid
            resolution = RESOLUTIONS[settings.get("posterior", "fine")]
        tr, _ = gamp_instance(params, settings, alpha, d, stream, n_gen=10,  # the plug-in error is not used
                              resolution=resolution, stop=stop)
        return tr

    def run_instance(self, params, settings, alpha, d, stream, watch=None):
        tr = self.trace(params, settings, alpha, d, stream, watch=watch)
        m = np.abs(np.diag(tr.overlap[-1]))
        return {"overlap_1": float(m[0]), "overlap_2": float(m[1]), "n_iter": tr.n_iter,
                "converged": int(bool(tr.converged)), "stopped": int(bool(tr.stopped))}


class SMIModel(Model):
    """Deep tied attention: a table of parameters and methods (the methods' code is in the classes above)."""

    def __init__(self):
        super().__init__(
            name="smi",
            description="deep tied attention / sequence multi-index model (T = 2 tokens, rank 1): SE, "
                        "GAMP, layer thresholds versus skip, layer-wise SGD",
            params={
                "alpha": _f("alpha", "sample complexity n/d", REQUIRED, 0.0),
                "skip": _f("skip", "skip strength c of the non-final layers", 1.0, 0.0),
                "depth": Param("depth", "choice", "number of attention layers (3: se only)", 2, choices=(2, 3)),
            },
            methods={
                "se": SE(_SE, version=9, doc="Bayes-optimal SE, plug-in and Bayes errors (v3: coarse-to-fine "
                                             "transient; v4: small-skip posterior, channels.py; v5: small-skip "
                                             "grid accepted by a local error estimate, strip box end fixed, z2 "
                                             "chart for V22 < 1e-3 (posterior_z2.py: eps < 1e-3 only); v6: "
                                             "small-skip grid refined per axis; v7: Anderson extrapolation and "
                                             "growth secant, method.anderson; v8: quasi-Newton fine stage "
                                             "from the coarse Jacobian, method.newton; Bayes error as the "
                                             "per-omega sample variance of 4 inner draws, T = 2 outputs written "
                                             "out; v9: the 2-layer posterior's sigmoids from running products, "
                                             "outputs within ~1e-11 relative of v8's)"),
                "gamp": GAMP(_GAMP, version=5, doc="GAMP at finite d, damping-consistent Onsager term "
                                                 "(v2: small-skip posterior; v3: small-skip grid accepted by a "
                                                 "local error estimate, strip box end fixed, z2 chart for "
                                                 "V22 < 1e-3; v4: small-skip grid refined per axis; v5: the "
                                                 "posterior's sigmoids from running products)"),
                "threshold": Threshold(_THR, version=9, doc="alpha_2 and alpha_1, stability and SE-map growth rate "
                                       "(v3: two-stage K11 root, walking bisection bracket; v4: small-skip "
                                       "posterior; v5: both routes on one point set, growth-rate rule, "
                                       "layer-2 curve parametrised by q; v6: a graph of works: Monte Carlo "
                                       "blocks, routes side by side, searches in rounds of k probes; v7: "
                                       "small-skip grid accepted by a local error estimate, strip box end "
                                       "fixed; v8: small-skip grid refined per axis; v9: the posterior's sigmoids "
                                       "from running products)",
                                       excludes=("alpha",)),
                "onset": Onset(_ONSET, version=8, doc="alpha_2 and alpha_1 by GAMP at several sizes d, "
                               "extrapolated d -> infinity (v2: diverged GAMP runs left out of the rule; v3: "
                               "small-skip grid refined per axis; v4: the sequential design and the stopping "
                               "rule of core/onset.py; v5: the posterior's sigmoids from running products; v6: the "
                               "'coarse' posterior grid, instances whose overlaps stand still stop (stop_flat), "
                               "stop_fraction 3e-3; v7: an instance stops only once every layer has settled, "
                               "not at zero on the watched layer alone; v8: the zero test reads each overlap's envelope over "
                               "stop_envelope = 12 iterations, so a decay through oscillations stops, and "
                               "stop_fraction 1e-2)",
                               excludes=("alpha",)),
                # alpha is a setting of sgd (not a grid dim): the log length depends on it
                "sgd": SGD(_SGD, version=1, doc="layer-wise SGD experiment", excludes=("alpha",)),
            },
        )

    def check_point(self, method, params):
        depth = int(params.get("depth", 2))
        # the 3-layer posterior costs ~2-5 ms a sample: fine for the SE, not validated for GAMP's n = alpha d
        # labels per iteration; thresholds and SGD are 2-layer constructions (spec §5, §8)
        if depth != 2 and method in ("threshold", "sgd", "gamp", "onset"):
            raise ParameterError("params.depth", f"the {method} method is implemented for 2 layers, got {depth}",
                                 "use depth = 2")
        return params

