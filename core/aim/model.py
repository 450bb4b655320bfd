"""The attention-indexed model (spec aim.md): S = W W^T / sqrt(r d), r = rho d, y = g(h) of the T x T index.

Registry name "aim". Parameters: `alpha` = n/d^2 (> 0), `rho` = r/d (> 0), `T` (tokens, >= 2), `channel`
(softmax | hardmax | linear), `hardmax_gout` ("exact", the Bayes g_out, default | "paper", the published
joint-density variant; hardmax only), `alpha_bar` = alpha/rho (the small-width method only).

Methods (the science is in se.py and thresholds.py):
- "se": the Bayes-optimal error mse = ||S_hat - S||_F^2 / d (1 at alpha = 0), q = Q0 - mse, qhat.
  softmax/linear by the closed-form parametric curve (n_iter = 0, converged = 1), hardmax (T = 2) by
  the fixed point. With `n_mc` > 0 the general channel step (Monte Carlo with the channel's g_out) is also
  iterated and stored as `mse_general` (spec Fig. 4: it must coincide with the closed form).
- "threshold": softmax/linear: the counting threshold alpha_c(rho, T) in closed form and by bisection on
  the SE error; hardmax: the small-width weak-recovery alpha_bar_WR in closed form, by stability (the SE
  bracket at q = 0) and by bisection of the small-width fixed point. A route that does not exist for the
  channel is NaN with the reason stored in `note`.
- "small_width": rho -> 0 at fixed alpha_bar (alpha and rho excluded): softmax/linear in closed form,
  hardmax by the 1-D fixed point.
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core import gamp
from seqphase.core.aim import figures
from seqphase.core.aim import gamp as gamp_mod
from seqphase.core.aim import gd as gd_mod
from seqphase.core.aim import se as se_mod
from seqphase.core.aim import thresholds
from seqphase.core.aim.channels import CHANNELS, HARDMAX_GOUT, make_channel
from seqphase.core.errors import ParameterError
from seqphase.core.models import REQUIRED, Layout, Method, Model, Param, SeededMethod, Variable, Work
from seqphase.core.numerics import forward_fill, nan_log
from seqphase.core.search import BISECTION_K_SETTING, relative_gap, side_by_side, single, threshold_variables

#: smallest alpha of the closed-form channels: the parametric curve ends at Delta = se.DELTA_MAX
ALPHA_MIN_CLOSED_FORM = 1e-6

_SE_SETTINGS = {
    "damping": Param("damping", "float", "weight of the old iterate (hardmax fixed point, in log V)", 0.5,
                     low=0.0, high=1.0, low_inclusive=True, high_inclusive=False),
    "tol": Param("tol", "float", "stop when |change of log V| < tol (hardmax)", 1e-10, low=0.0, high=1e-2),
    "max_iter": Param("max_iter", "int", "iteration cap of the hardmax fixed point", 5000, low=1,
                      high=1_000_000, low_inclusive=True),
    "n_mc": Param("n_mc", "int", "Monte Carlo samples of the general channel step (0: not run)", 0, low=0,
                  high=10_000_000, low_inclusive=True),
}

_THRESHOLD_SETTINGS = {
    "mse_cut": Param("mse_cut", "float", "SE error below which the counting bisection counts alpha as "
                     "perfectly recovered", 1e-4, low=0.0, high=0.1),
    "overlap_cut": Param("overlap_cut", "float", "small-width q above which the hardmax bisection counts "
                         "weak recovery", 1e-10, low=0.0, high=1e-2),
    "rtol": Param("rtol", "float", "relative width at which bisections stop", 1e-7, low=0.0, high=0.1),
    "k": BISECTION_K_SETTING,
}

_SMALL_WIDTH_SETTINGS = {}

_CLOSED = ("softmax", "linear")


class SE(Method):
    """Bayes-optimal SE at one (alpha, rho, T, channel)."""

    def layout(self, settings):
        return Layout({"se_iteration": np.arange(settings["max_iter"] + 1)}, {
            "mse": Variable((), "f8", "Bayes-optimal error ||S_hat - S||_F^2 / d = Q0 - q"),
            "q": Variable((), "f8", "overlap Tr(S S_hat)/d, in [rho, 1 + rho]"),
            "qhat": Variable((), "f8", "conjugate of q (inf at perfect recovery)"),
            "n_iter": Variable((), "i4", "fixed-point iterations (0 for the closed-form channels)"),
            "converged": Variable((), "i1", "1 if the fixed point met its tolerance (1 for closed forms)"),
            "residual": Variable(("se_iteration",), "f8", "hardmax: |change of log V| per iteration (NaN after)"),
            "mse_general": Variable((), "f8", "error of the general (Monte Carlo) channel step; NaN unless "
                                    "n_mc > 0"),
        })

    def run(self, params, settings, seed_sequence):
        alpha, rho, T, channel = params["alpha"], params["rho"], params["T"], params["channel"]
        if channel in _CLOSED:
            state = se_mod.closed_form_se(alpha, rho, se_mod.counting_k(channel, T))
        else:
            state = se_mod.hardmax_se(alpha, rho, params["hardmax_gout"], damping=settings["damping"],
                                      tol=settings["tol"], max_iter=settings["max_iter"])
        general = math.nan
        if settings["n_mc"] > 0:
            seed = int(seed_sequence.generate_state(1)[0])
            general = se_mod.general_se(alpha, rho, make_channel(channel, T, params["hardmax_gout"]),
                                        n_mc=settings["n_mc"], seed=seed, damping=settings["damping"]).mse
        return {"mse": state.mse, "q": state.q, "qhat": state.qhat, "n_iter": state.n_iter,
                "converged": int(bool(state.converged)),
                "residual": nan_log(state.residuals, settings["max_iter"] + 1), "mse_general": general}

    def figure(self, plt, ds, companions):
        return figures.plot_se(plt, ds, companions)


class Threshold(Method):
    """alpha_c (softmax/linear) or the small-width alpha_bar_WR (hardmax), two or three ways."""

    def layout(self, settings):
        return Layout({}, {
            "quantity": Variable((), "U64", "which threshold: 'alpha_c' (counting, perfect recovery) or "
                                 "'alpha_bar_WR' (small-width weak recovery, alpha/rho)"),
            **threshold_variables("alpha_closed_form", "closed form",
                                  "bisection on the SE (error < mse_cut, or q > overlap_cut)"),
            "alpha_stability": Variable((), "f8", "hardmax: 1/(2 E0) by the SE quadrature; see `note`"),
            "note": Variable((), "U200", "why a route is NaN ('' if every route is defined)"),
        })

    def tasks(self, params, settings, seed_sequence):
        """The point as a graph: the bisection on the SE in rounds of k probes (`search.section_search`,
        the bisection placement: the serial bisection's value whatever k), hardmax's stability (one work)
        side by side with it; the closed forms here."""
        T, channel, k = params["T"], params["channel"], settings["k"]
        if channel in _CLOSED:
            rho = params["rho"]
            closed = thresholds.counting_threshold(rho, T, channel)
            bisection, _, _ = yield from thresholds.counting_bisection_route(
                rho, T, channel, mse_cut=settings["mse_cut"], rtol=settings["rtol"], k=k)
            stability, quantity = math.nan, "alpha_c"
            note = ("no stability route: alpha_c is a continuous perfect-recovery transition "
                    "(closed form vs SE bisection)")
        else:
            gout = params["hardmax_gout"]
            closed = thresholds.weak_recovery_closed_form(gout)
            stability, (bisection, _, _) = yield from side_by_side([
                single(Work("stability", thresholds.weak_recovery_stability, {"gout": gout})),
                thresholds.weak_recovery_bisection_route(gout, overlap_cut=settings["overlap_cut"],
                                                         rtol=max(settings["rtol"], 1e-6), k=k)])
            quantity, note = "alpha_bar_WR", ""
        return {"quantity": quantity, "alpha_closed_form": closed, "alpha_bisection": bisection,
                "alpha_stability": stability, "relative_gap": relative_gap(closed, bisection), "note": note}

    def figure(self, plt, ds, companions):
        return figures.plot_thresholds(plt, ds, companions)


class SmallWidth(Method):
    """rho -> 0 at fixed alpha_bar = alpha/rho."""

    def layout(self, settings):
        return Layout({}, {
            "mse": Variable((), "f8", "small-width error 1 - q"),
            "q": Variable((), "f8", "small-width overlap (Q0 -> 1)"),
            "t": Variable((), "f8", "t = rho/qhat (Delta = t/rho)"),
        })

    def run(self, params, settings, seed_sequence):
        alpha_bar, T, channel = params["alpha_bar"], params["T"], params["channel"]
        if channel in _CLOSED:
            k = se_mod.counting_k(channel, T)
            err = float(se_mod.small_width_closed_form(alpha_bar, k))
            return {"mse": err, "q": 1.0 - err, "t": err / (k * alpha_bar) if err > 0 else 0.0}
        err, q, t = se_mod.small_width_hardmax(alpha_bar, params["hardmax_gout"])
        return {"mse": err, "q": q, "t": t}

    def figure(self, plt, ds, companions):
        return figures.plot_small_width(plt, ds, companions)


_GAMP_SETTINGS = {
    "d": Param("d", "int", "dimension of the instances (the paper: 100; 120 for T = 4, 5)", 100, low=2,
               high=2000, low_inclusive=True),
    "n_seeds": Param("n_seeds", "int", "instances per point", 16, low=1, high=4096, low_inclusive=True),
    "max_iter": Param("max_iter", "int", "GAMP iterations (the trace is forward-filled after the stop)", 500,
                      low=1, high=100_000, low_inclusive=True),
    "damping": Param("damping", "float", "weight of the old estimate and variance", 0.5, low=0.0, high=1.0,
                     low_inclusive=True, high_inclusive=False),
    "tol": Param("tol", "float", "stop when ||S_hat_t - S_hat_{t-1}||_F^2 / d < tol", 1e-5, low=0.0, high=1.0),
    "cavity": Param("cavity", "choice", "cavity covariance of the index: 'scalar' (spec), 'gram' (per sample) "
                    "or 'auto' (gram; scalar for the published hardmax g_out; version 1: scalar for all hardmax)", "auto",
                    choices=("auto",) + gamp_mod.CAVITIES),
}


class GAMP(SeededMethod):
    """GAMP-RIE on `n_seeds` instances of dimension d at one (alpha, rho, T, channel), with the SE error."""

    shared = True

    def layout(self, settings):
        dims = {"seed": np.arange(settings["n_seeds"]), "iteration": np.arange(settings["max_iter"] + 1)}
        traced = ("seed", "iteration")
        return Layout(dims, {
            "mse": Variable(traced, "f8", "error ||S_hat - S||_F^2 / d per iteration (0 = the start "
                            "sqrt(rho) I; forward-filled after the stop)"),
            "overlap": Variable(traced, "f8", "Tr(S_hat S) / d per iteration"),
            "mse_predicted": Variable(traced, "f8", "GAMP's own error prediction mmse_RIE(1/qhat) per iteration"),
            "n_iter": Variable(("seed",), "i4", "iterations run"),
            "converged": Variable(("seed",), "i1", "1 if the change fell below tol (or c collapsed)"),
            "diverged": Variable(("seed",), "i1", "1 if g or the estimate became non-finite"),
            "mse_se": Variable((), "f8", "SE (Bayes-optimal) error at the same point"),
        })

    def check(self, params, settings):
        gamp_mod.teacher_rank(params["rho"], settings["d"])

    def run_seed(self, params, settings, stream):
        alpha, rho, T = params["alpha"], params["rho"], params["T"]
        channel = make_channel(params["channel"], T, params.get("hardmax_gout", "exact"))
        d, n_trace = settings["d"], settings["max_iter"] + 1
        gamp_mod.teacher_rank(rho, d)
        cavity = None if settings["cavity"] == "auto" else settings["cavity"]  # None: AIMSteps' default_cavity
        X, S, y = gamp_mod.sample_instance(channel, alpha, rho, d, np.random.default_rng(stream))
        trace = gamp.iterate(gamp_mod.AIMSteps(channel, X, y, S, rho, cavity=cavity), max_iter=settings["max_iter"],
                             damping=settings["damping"], tol=settings["tol"])
        out = {name: forward_fill(getattr(trace, name), n_trace) for name in ("mse", "overlap", "mse_predicted")}
        out.update(n_iter=trace.n_iter, converged=int(trace.converged), diverged=int(trace.diverged))
        return out

    def run_shared(self, params, settings, seed_sequence):
        return {"mse_se": se_error(params)}

    def figure(self, plt, ds, companions):
        return figures.plot_gamp(plt, ds, companions)


def se_error(params):
    """The SE error at a point: the closed form (softmax, linear) or the hardmax fixed point."""
    channel = params["channel"]
    if channel == "hardmax":
        return float(se_mod.hardmax_se(params["alpha"], params["rho"], params.get("hardmax_gout", "exact")).mse)
    return float(se_mod.closed_form_se(params["alpha"], params["rho"], se_mod.counting_k(channel, params["T"])).mse)


_GD_SETTINGS = {
    "d": Param("d", "int", "input dimension D (spec/paper code: 200; 100 by default: the paper's caption, and "
               "16x cheaper, the cost growing as D^4)", 100, low=4, high=2000, low_inclusive=True),
    "n_seeds": Param("n_seeds", "int", "instances (teacher + training set) per point", 16, low=1, high=10_000,
                     low_inclusive=True),
    "n_students": Param("n_students", "int", "students per instance (independent initialisations, same data); "
                        "AGD averages their S_hat (paper: 32)", 32, low=1, high=10_000, low_inclusive=True),
    "steps": Param("steps", "int", "full-batch Adam steps (paper: 1000)", 1000, low=1, high=10**6,
                   low_inclusive=True),
    "lr": Param("lr", "float", "Adam learning rate (paper: 0.1)", 0.1, low=0.0),
    "log_every": Param("log_every", "int", "steps between logged errors (step 0 and the last are always "
                       "logged)", 10, low=1, high=10**6, low_inclusive=True),
    "beta": Param("beta", "float", "softmax inverse temperature of teacher and student (paper: 1)", 1.0,
                  low=0.0),
    "precision": Param("precision", "choice", "floating point of the training (teacher, labels and errors "
                       "are float64); float32 as the authors' torch code, ~2x faster", "float32",
                       choices=("float32", "float64")),
}


class GD(SeededMethod):
    """Full-batch GD (Adam) and averaged GD on the softmax AIM, n_seeds instances per point, against the
    SE error at the point (spec §4)."""

    shared = True

    def layout(self, settings):
        return Layout({"seed": np.arange(settings["n_seeds"]),
                       "epoch": gd_mod.logged_steps(settings["steps"], settings["log_every"])}, {
            "mse_gd": Variable(("seed", "epoch"), "f8", "GD error ||S_hat - S*||_F^2 / d of single students, "
                               "averaged over the n_students students of the seed"),
            "mse_agd": Variable(("seed", "epoch"), "f8", "AGD error: ||mean_i S_hat_i - S*||_F^2 / d over the "
                                "n_students students"),
            "train_loss": Variable(("seed", "epoch"), "f8", "training loss sum (y_hat - y)^2 / d per sequence "
                                   "(divided by n), mean over the students"),
            "mse_se": Variable((), "f8", "Bayes-optimal (SE) error at the point"),
        })

    def check(self, params, settings):
        if params.get("channel", "softmax") != "softmax":
            raise ParameterError("params.channel", f"method 'gd' is the softmax experiment, got "
                                 f"{params['channel']!r}", "use channel = \"softmax\"")
        gd_mod.student_width(params["rho"], settings["d"])

    def run_seed(self, params, settings, stream):
        self.check(params, settings)
        run = gd_mod.run_seed(alpha=float(params["alpha"]), rho=float(params["rho"]), T=int(params["T"]),
                              d=settings["d"], n_students=settings["n_students"], steps=settings["steps"],
                              lr=settings["lr"], log_every=settings["log_every"], beta=settings["beta"],
                              seed_sequence=stream, precision=settings["precision"])
        return {name: run[name] for name in ("mse_gd", "mse_agd", "train_loss")}

    def run_shared(self, params, settings, seed_sequence):
        alpha, rho, T = float(params["alpha"]), float(params["rho"]), int(params["T"])
        return {"mse_se": se_mod.closed_form_se(alpha, rho, se_mod.counting_k("softmax", T)).mse}

    def figure(self, plt, ds, companions):
        return figures.plot_gd(plt, ds, companions)


class AIMModel(Model):
    """The AIM: a table of parameters and methods."""

    def __init__(self):
        super().__init__(
            name="aim",
            description="attention-indexed model: extensive-rank tied attention S = W W^T / sqrt(r d), "
                        "softmax / hardmax / linear output, alpha = n/d^2",
            params={
                "alpha": Param("alpha", "float", "sample complexity n/d^2", REQUIRED, low=0.0),
                "rho": Param("rho", "float", "width ratio r/d", 0.5, low=0.0),
                "T": Param("T", "int", "tokens per sequence", 2, low=2, low_inclusive=True, high=64),
                "channel": Param("channel", "choice", "output channel", "softmax", choices=tuple(CHANNELS)),
                "hardmax_gout": Param("hardmax_gout", "choice", "hardmax g_out: 'exact' (Bayes) or 'paper' "
                                      "(the published joint-density variant)", "exact", choices=HARDMAX_GOUT),
                "alpha_bar": Param("alpha_bar", "float", "alpha/rho (small-width method only)", REQUIRED,
                                   low=0.0),
            },
            methods={
                "se": SE(_SE_SETTINGS, version=1, doc="Bayes-optimal SE (closed form or fixed point)",
                         excludes=("alpha_bar",)),
                "threshold": Threshold(_THRESHOLD_SETTINGS, version=1,
                                       doc="counting alpha_c or small-width alpha_bar_WR, two ways",
                                       excludes=("alpha", "alpha_bar"), later_settings=("k",)),
                "gamp": GAMP(_GAMP_SETTINGS, version=2, doc="GAMP-RIE on finite instances (spec §3)",
                             excludes=("alpha_bar",)),
                "gd": GD(_GD_SETTINGS, version=1, doc="full-batch GD (Adam) and averaged GD on the softmax AIM, "
                         "against the SE", excludes=("alpha_bar",)),
                "small_width": SmallWidth(_SMALL_WIDTH_SETTINGS, version=1,
                                          doc="small-width limit rho -> 0 at fixed alpha_bar",
                                          excludes=("alpha", "rho")),
            },
        )

    def check_point(self, method, params):
        channel = params.get("channel", "softmax")
        T = int(params.get("T", 2))
        if channel == "hardmax" and T != 2:
            raise ParameterError("params.T", f"the hardmax channel is implemented for T = 2, got T = {T}",
                                 "use T = 2 with channel = \"hardmax\"")
        if channel != "hardmax" and params.get("hardmax_gout", "exact") != "exact":
            raise ParameterError("params.hardmax_gout",
                                 f"hardmax_gout = {params['hardmax_gout']!r} is only used by channel 'hardmax'",
                                 "remove hardmax_gout or set channel = \"hardmax\"")
        if method == "se" and channel in _CLOSED and params["alpha"] < ALPHA_MIN_CLOSED_FORM:
            raise ParameterError("params.alpha", f"alpha = {params['alpha']:g} is below the closed-form "
                                 f"curve's range", f"use alpha >= {ALPHA_MIN_CLOSED_FORM:g}")
        return params
