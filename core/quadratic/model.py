"""The extensive-width quadratic network (spec rie_bsr_quadratic.md part B): Bayes-optimal error and the
perfect-recovery threshold.

Registry name "quadratic". Parameters: `alpha` = n/d^2 (> 0), `kappa` = m/d (> 0), `delta` = label-noise
VARIANCE (>= 0) in y = Tr[(x x^T - I) S*]/d + sqrt(delta) z, S* = W*^T W*/sqrt(m) (the authors' code and data;
their plotting caption "Delta = 0.25^2" disagrees, spec §9 item 1; the theory scripts' Delta is delta/kappa).

Methods (the science is in se.py and thresholds.py):
- "se": the Bayes-optimal error `mse` = (1/d^2) E||S_hat - S*||_F^2 (1 at alpha = 0, the reference files'
  `gen_error`), `qhat` = 1/t (inf at perfect recovery), and `alpha_pr`, the closed-form perfect-recovery
  threshold of the point's kappa (NaN when delta > 0: no perfect recovery with noise).
- "threshold": alpha_PR(kappa) in closed form and by bisection on the noiseless SE error (delta and alpha
  are not parameters of this method).
- "gamp": GAMP-RIE (gamp.py) on n_seeds instances of dimension d: per seed and iteration the error in paper
  units, its own prediction, the flags, and the SE error `mse_se`.
- "gd": full-batch GD and averaged GD (gd.py) from N(0, 1) initialisations, n_students per instance: errors
  per logged step in paper units (mean single student, and of their average), and `mse_se`.
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core import gamp
from seqphase.core.errors import ParameterError
from seqphase.core.models import REQUIRED, Layout, Method, Model, Param, SeededMethod, Variable, Work
from seqphase.core.numerics import forward_fill
from seqphase.core.quadratic import figures
from seqphase.core.quadratic import gamp as gamp_mod
from seqphase.core.quadratic import gd as gd_mod
from seqphase.core.quadratic import se as se_mod
from seqphase.core.quadratic import thresholds
from seqphase.core.search import (BISECTION_K_SETTING, K_SETTING, relative_gap, section_search, side_by_side, single,
                                  threshold_variables)

_THRESHOLD_SETTINGS = {
    "mse_cut": Param("mse_cut", "float", "SE error (paper units) below which the bisection counts alpha as "
                     "perfectly recovered", 1e-4, low=0.0, high=0.1),
    "rtol": Param("rtol", "float", "relative width at which the bisection stops", 1e-9, low=0.0, high=0.1),
    "k": BISECTION_K_SETTING,
}


class SE(Method):
    """Bayes-optimal error at one (alpha, kappa, delta): the scalar equation of spec §B2."""

    def layout(self, settings):
        return Layout({}, {
            "mse": Variable((), "f8", "Bayes-optimal error (1/d^2) E||S_hat - S*||_F^2 = kappa mmse_RIE(t) "
                            "(1 at alpha = 0)"),
            "qhat": Variable((), "f8", "1/t, t the effective noise of the RIE prior step (inf at perfect recovery)"),
            "alpha_pr": Variable((), "f8", "closed-form perfect-recovery threshold of kappa (NaN if delta > 0)"),
        })

    def run(self, params, settings, seed_sequence):
        alpha, kappa, delta = params["alpha"], params["kappa"], params["delta"]
        state = se_mod.bo_state(alpha, kappa, delta)
        return {"mse": state.mse, "qhat": state.qhat,
                "alpha_pr": thresholds.alpha_pr(kappa) if delta == 0 else math.nan}

    def figure(self, plt, ds, companions):
        return figures.plot_se(plt, ds, companions)


class Threshold(Method):
    """alpha_PR(kappa) two ways (noiseless)."""

    def layout(self, settings):
        return Layout({}, threshold_variables("alpha_closed_form", "kappa - kappa^2/2 (kappa < 1), 1/2 (kappa >= 1)",
                                              "smallest alpha with noiseless SE error < mse_cut"))

    def tasks(self, params, settings, seed_sequence):
        """The point as a graph: the bisection on the SE in rounds of k probes (`search.section_search`, the
        bisection placement: the serial bisection's value whatever k); the closed form here."""
        closed = thresholds.alpha_pr(params["kappa"])
        bisection, _, _ = yield from thresholds.alpha_pr_bisection_route(
            params["kappa"], mse_cut=settings["mse_cut"], rtol=settings["rtol"], k=settings["k"])
        return {"alpha_closed_form": closed, "alpha_bisection": bisection,
                "relative_gap": relative_gap(closed, bisection)}

    def figure(self, plt, ds, companions):
        return figures.plot_thresholds(plt, ds, companions)


_GAMP_SETTINGS = {
    "d": Param("d", "int", "dimension of the instances (the paper: 100 and 200)", 100, low=2, high=2000,
               low_inclusive=True),
    "n_seeds": Param("n_seeds", "int", "instances per point", 16, low=1, high=4096, low_inclusive=True),
    "max_iter": Param("max_iter", "int", "GAMP iterations (the trace is forward-filled after the stop)", 100,
                      low=1, high=100_000, low_inclusive=True),
    "damping": Param("damping", "float", "damping weight of the old iterate (0: undamped)", 0.5, low=0.0,
                     high=1.0, low_inclusive=True, high_inclusive=False),
    "damp": Param("damp", "choice", "what is damped: 'estimate' (S_hat and its variance, the shared loop) or "
                  "'channel' (omega and V, the authors' notebook)", "estimate", choices=gamp_mod.DAMPING_FORMS),
    "cavity": Param("cavity", "choice", "cavity variance of the pre-activation: 'gram' (per sample, from "
                    "||x||^2) or 'scalar' (2 c, the spec's)", "gram", choices=gamp_mod.CAVITIES),
    "tol": Param("tol", "float", "stop when kappa ||S_hat_t - S_hat_{t-1}||_F^2 / d < tol (paper units)", 1e-5,
                 low=0.0, high=1.0),
}


class GAMP(SeededMethod):
    """GAMP-RIE (spec §B3) on `n_seeds` instances of dimension d at one (alpha, kappa, delta), with the SE
    error of the point."""

    shared = True

    def layout(self, settings):
        dims = {"seed": np.arange(settings["n_seeds"]), "iteration": np.arange(settings["max_iter"] + 1)}
        traced = ("seed", "iteration")
        return Layout(dims, {
            "mse": Variable(traced, "f8", "error (1/d^2)||S_hat - S*||_F^2 per iteration (paper units, 1 at "
                            "alpha = 0; 0 = the start S_hat = E[S*]; forward-filled after the stop)"),
            "mse_predicted": Variable(traced, "f8", "GAMP's own error prediction kappa mmse_RIE(1/qhat) per "
                                      "iteration"),
            "n_iter": Variable(("seed",), "i4", "iterations run"),
            "converged": Variable(("seed",), "i1", "1 if the change fell below tol (or the predicted error "
                                  "collapsed)"),
            "diverged": Variable(("seed",), "i1", "1 if g or the estimate became non-finite"),
            "mse_se": Variable((), "f8", "SE (Bayes-optimal) error at the same point"),
        })

    def check(self, params, settings):
        gamp_mod.teacher_width(params["kappa"], settings["d"])
        gamp_mod.n_samples(params["alpha"], settings["d"])

    def run_seed(self, params, settings, stream):
        self.check(params, settings)
        alpha, kappa, delta = params["alpha"], params["kappa"], params["delta"]
        n_trace = settings["max_iter"] + 1
        x, W, y = gamp_mod.sample_instance(alpha, kappa, delta, settings["d"], np.random.default_rng(stream))
        steps = gamp_mod.QuadraticSteps(x, y, W, delta, cavity=settings["cavity"], damp=settings["damp"])
        trace = gamp.iterate(steps, max_iter=settings["max_iter"], damping=settings["damping"], tol=settings["tol"])
        return {"mse": forward_fill(trace.mse, n_trace), "mse_predicted": forward_fill(trace.mse_predicted, n_trace),
                "n_iter": trace.n_iter, "converged": int(trace.converged), "diverged": int(trace.diverged)}

    def run_shared(self, params, settings, seed_sequence):
        return {"mse_se": se_mod.bo_state(params["alpha"], params["kappa"], params["delta"]).mse}

    def figure(self, plt, ds, companions):
        return figures.plot_gamp(plt, ds, companions)


_GD_SETTINGS = {
    "d": Param("d", "int", "input dimension (the authors' data: 200; cost ~ alpha kappa d^4 per step)", 50, low=2,
               high=2000, low_inclusive=True),
    "n_seeds": Param("n_seeds", "int", "instances (teacher + training set) per point", 16, low=1, high=10_000,
                     low_inclusive=True),
    "n_students": Param("n_students", "int", "students per instance (independent N(0, 1) initialisations, same "
                        "data); AGD averages their S_hat (the authors: 16 or 64)", 16, low=1, high=10_000,
                        low_inclusive=True),
    "steps": Param("steps", "int", "full-batch optimiser steps", 2000, low=1, high=10**6, low_inclusive=True),
    "optimiser": Param("optimiser", "choice", "'gd' (plain full-batch gradient descent, the authors' averaged "
                       "script) or 'adam' (their vanilla script)", "gd", choices=("gd", "adam")),
    "lr": Param("lr", "float", "learning rate (the authors: 0.1 for gd, 0.01 for adam)", 0.1, low=0.0),
    "log_every": Param("log_every", "int", "steps between logged errors (step 0 and the last are always logged)",
                       50, low=1, high=10**6, low_inclusive=True),
}


class GD(SeededMethod):
    """Full-batch GD and averaged GD (spec §B4) on n_seeds instances per point, against the SE error."""

    shared = True

    def layout(self, settings):
        return Layout({"seed": np.arange(settings["n_seeds"]),
                       "step": gd_mod.log_marks(settings["steps"], settings["log_every"])}, {
            "mse_gd": Variable(("seed", "step"), "f8", "GD error (1/d^2)||S_hat - S*||_F^2 of single students "
                               "(paper units), mean over the n_students students of the seed"),
            "mse_agd": Variable(("seed", "step"), "f8", "AGD error (1/d^2)||mean_i S_hat_i - S*||_F^2"),
            "train_loss": Variable(("seed", "step"), "f8", "training loss sum (y_hat - y)^2 / 4, divided by n, "
                                   "mean over the students"),
            "mse_se": Variable((), "f8", "Bayes-optimal (SE) error at the point"),
        })

    def check(self, params, settings):
        gamp_mod.teacher_width(params["kappa"], settings["d"])
        gamp_mod.n_samples(params["alpha"], settings["d"])

    def run_seed(self, params, settings, stream):
        self.check(params, settings)
        run = gd_mod.run_seed(alpha=float(params["alpha"]), kappa=float(params["kappa"]),
                              delta=float(params["delta"]), d=settings["d"], n_students=settings["n_students"],
                              steps=settings["steps"], lr=settings["lr"], log_every=settings["log_every"],
                              optimiser=settings["optimiser"], seed_sequence=stream)
        return {name: run[name] for name in ("mse_gd", "mse_agd", "train_loss")}

    def run_shared(self, params, settings, seed_sequence):
        return {"mse_se": se_mod.bo_state(float(params["alpha"]), float(params["kappa"]), float(params["delta"])).mse}

    def figure(self, plt, ds, companions):
        return figures.plot_gd(plt, ds, companions)


class QuadraticModel(Model):
    """The extensive-width quadratic network: a table of parameters and methods."""

    def __init__(self):
        super().__init__(
            name="quadratic",
            description="extensive-width two-layer network with quadratic activation, m = kappa d hidden "
                        "units, n = alpha d^2 samples, label-noise variance delta (Bayes-optimal error)",
            params={
                "alpha": Param("alpha", "float", "sample complexity n/d^2", REQUIRED, low=0.0),
                "kappa": Param("kappa", "float", "width ratio m/d", 0.5, low=0.0),
                "delta": Param("delta", "float", "label-noise variance (y = Tr[(x x^T - I) S*]/d + sqrt(delta) z)",
                               0.0, low=0.0, low_inclusive=True),
            },
            methods={
                "se": SE({}, version=1, doc="Bayes-optimal error from the scalar equation (spec B2)"),
                "threshold": Threshold(_THRESHOLD_SETTINGS, version=1,
                                       doc="perfect-recovery alpha_PR(kappa), closed form and SE bisection",
                                       excludes=("alpha", "delta"), later_settings=("k",)),
                "gamp": GAMP(_GAMP_SETTINGS, version=1, doc="GAMP-RIE on finite instances against the SE (spec B3)"),
                "gd": GD(_GD_SETTINGS, version=1, doc="full-batch GD and averaged GD from N(0, 1) initialisations "
                         "against the SE (spec B4)"),
            },
        )

    def check_point(self, method, params):
        if method == "se":
            kappa, delta, alpha = params["kappa"], params["delta"], params["alpha"]
            # alpha(t) <= (1/kappa + delta/(2 kappa)) / (2 t): below this at t = T_MAX the curve has no root
            floor = (1.0 / kappa + delta / (2.0 * kappa)) / (2.0 * se_mod.T_MAX)
            if alpha <= floor:
                raise ParameterError("params.alpha", f"alpha = {alpha:g} is below the SE curve's range "
                                     f"({floor:.3g} at kappa = {kappa:g})", f"use alpha > {floor:.3g}")
        return params


# ----------------------------------------------------------------------------------------------------
# ERM with weight decay: model "quadratic-erm" (spec erm_quadratic.md; the SE and its conventions in erm.py)
# ----------------------------------------------------------------------------------------------------

from seqphase.core.quadratic import erm as erm_mod  # noqa: E402


class ERMSE(Method):
    """ERM test error, training loss and rank at one (alpha, kappa_star, kappa, delta, lam): the xi-continuation
    of spec §2 mapped onto alpha (erm.py), with the Bayes-optimal error of the same teacher beside it."""

    def layout(self, settings):
        return Layout({}, {
            "test_error": Variable((), "f8", "(1/d) ||S_hat - S*||_F^2 in S' units (S* = W*^T W*/m*; Q0 = 1 + "
                                   "1/kappa_star at alpha -> 0)"),
            "test_error_bo": Variable((), "f8", "kappa_star * test_error = (1/d^2) ||S_hat - S*||^2 with S* = "
                                      "W*^T W*/sqrt(m*): the units of model quadratic's mse"),
            "bo_mse": Variable((), "f8", "Bayes-optimal error of the same teacher, model quadratic's mse at "
                               "kappa = kappa_star and label-noise variance kappa_star * delta"),
            "train_loss": Variable((), "f8", "(1/(4n)) sum (y - <X, S_hat>)^2 at the minimiser (data term of L)"),
            "rank_fraction": Variable((), "f8", "rank(S_hat)/d"),
            "xi": Variable((), "f8", "effective GOE noise variance of the spectral denoising problem"),
            "q": Variable((), "f8", "soft threshold on the eigenvalues of Y = S* + sqrt(xi) Z"),
        })

    def run(self, params, settings, seed_sequence):
        ks, kappa, delta, lam = params["kappa_star"], params["kappa"], params["delta"], params["lam"]
        state = erm_mod.erm_state(params["alpha"], ks, kappa, delta, lam)
        bo = float(se_mod.bo_mse(params["alpha"], ks, ks * delta)) if settings["with_bo"] else math.nan
        return {"test_error": state.test_error, "test_error_bo": state.test_error_bo, "bo_mse": bo,
                "train_loss": state.train_loss, "rank_fraction": state.rank_fraction, "xi": state.xi, "q": state.q}

    def figure(self, plt, ds, companions):
        return figures.plot_erm_se(plt, ds, companions)


def erm_search_work(what, kappa_star, kappa, delta, lam, alpha=None, cut=None):
    """One work of an ERM threshold point: `what` = "interp-equation", "sr-equation" (the dedicated
    equations), "interp-bracket", "sr-bracket" (a search's alpha bracket; None when the lam > 0 table
    cannot be mapped onto alpha), "interp", "sr" (a probe: the search's predicate at alpha; None for an
    interp probe that meets an SE curve that cannot be mapped, erm.ERMCurveError, which version 1 stored
    as NaN too)."""
    if what == "interp-equation":
        return thresholds.alpha_interp_equation(kappa_star, kappa, delta)
    if what == "sr-equation":
        return thresholds.alpha_sr_statistical_dimension(kappa_star)[0]
    if what == "sr-bracket":
        return thresholds.sr_bracket(kappa_star)
    if what == "sr":
        return thresholds.sr_recovered(kappa_star, alpha, mse_cut=cut)
    try:
        if what == "interp-bracket":
            return thresholds.interp_bracket(kappa_star, kappa, delta, lam)
        if what == "interp":
            return thresholds.interp_exceeded(kappa_star, kappa, delta, lam, alpha, train_cut=cut)
    except erm_mod.ERMCurveError:
        return None
    raise ValueError(f"unknown ERM threshold work {what!r}")


def erm_interp_route(common, *, train_cut, rtol, k):
    """alpha_interp by the curve (a route): the smallest alpha whose SE training loss at weight decay
    common["lam"] exceeds train_cut, a k-section (`search.section_search`, one SE point a probe) of the
    bracket work's [1.01 x the lowest alpha of the SE table, min(5, 0.99 x its highest)]; inf when the loss
    stays below the cut there, NaN when the table cannot be mapped onto alpha. Returns (value, bracket ends).

    In the interpolating phase train_loss = lam^2 alpha xi / q^2 = O(lam^2) (q = O(1)); beyond alpha_interp it
    grows like (alpha - alpha_interp)^2 (the residual ~ 1 - J/alpha). Interpolating points count as such while
    q > lam sqrt(alpha xi / train_cut) (3e-3 at the defaults). Near alpha_interp with label noise the
    xi-continuation folds (the test-error peak); erm.ERMCurve.at_alpha then solves on the traced fold (erm.Fold)."""
    bracket = yield from single(Work("interp-bracket", erm_search_work, dict(common, what="interp-bracket")))
    if bracket is None:  # the table cannot be mapped onto alpha (erm.ERMCurveError)
        return math.nan, math.nan, math.nan
    return (yield from section_search(
        "interp", lambda a: (erm_search_work, dict(common, what="interp", alpha=a, cut=train_cut)),
        bracket[0], bracket[1], rtol, k, false_at_hi=math.inf))


def erm_sr_route(common, *, mse_cut, rtol, k):
    """alpha_SR by the curve (a route): the smallest alpha whose noiseless lam -> 0+ SE test error (convex
    student, kappa = 2) is below mse_cut, a k-section of the bracket work's [1.01 x the lowest alpha of the
    SE table, 1]. Returns (value, bracket ends)."""
    lo, hi = yield from single(Work("sr-bracket", erm_search_work, dict(common, what="sr-bracket")))
    return (yield from section_search(
        "sr", lambda a: (erm_search_work, dict(common, what="sr", alpha=a, cut=mse_cut)), lo, hi, rtol, k))


class ERMThreshold(Method):
    """alpha_interp(kappa_star, kappa, delta) (lam -> 0+) and the noiseless alpha_SR(kappa_star), two routes each."""

    def layout(self, settings):
        return Layout({}, {
            "alpha_interp_equation": Variable((), "f8", "alpha(xi*, q=0) with alpha(xi, 0) = J(xi, 0) (inf: "
                                              "interpolates at every alpha)"),
            "alpha_interp_bisection": Variable((), "f8", "smallest alpha with SE train_loss > train_cut at "
                                               "lam = lam_small (NaN: a step met an SE curve that could not be "
                                               "mapped onto alpha, erm.ERMCurveError)"),
            "alpha_interp_gap": Variable((), "f8", "relative gap of the two alpha_interp"),
            "alpha_sr_equation": Variable((), "f8", "noiseless strong recovery from the statistical dimension"),
            "alpha_sr_bisection": Variable((), "f8", "smallest alpha with noiseless lam -> 0+ SE error < mse_cut"),
            "alpha_sr_gap": Variable((), "f8", "relative gap of the two alpha_SR"),
        })

    def tasks(self, params, settings, seed_sequence):
        """The point as a graph (version 2): the two dedicated equations (one work each) and the two
        searches side by side (`erm_interp_route`, `erm_sr_route`)."""
        common = {"kappa_star": params["kappa_star"], "kappa": params["kappa"], "delta": params["delta"],
                  "lam": settings["lam_small"]}
        search = {"rtol": settings["rtol"], "k": settings["k"]}
        eq, (bis, _, _), sr_eq, (sr_bis, _, _) = yield from side_by_side([
            single(Work("interp-equation", erm_search_work, dict(common, what="interp-equation"))),
            erm_interp_route(common, train_cut=settings["train_cut"], **search),
            single(Work("sr-equation", erm_search_work, dict(common, what="sr-equation"))),
            erm_sr_route(common, mse_cut=settings["mse_cut"], **search)])
        return {"alpha_interp_equation": eq, "alpha_interp_bisection": bis, "alpha_interp_gap": relative_gap(eq, bis),
                "alpha_sr_equation": sr_eq, "alpha_sr_bisection": sr_bis, "alpha_sr_gap": relative_gap(sr_eq, sr_bis)}

    def figure(self, plt, ds, companions):
        return figures.plot_erm_thresholds(plt, ds, companions)


_ERM_SE_SETTINGS = {
    "with_bo": Param("with_bo", "bool", "also compute the Bayes-optimal error of the same teacher (bo_mse)", True),
}

_ERM_THRESHOLD_SETTINGS = {
    "lam_small": Param("lam_small", "float", "weight decay of the bisection route to alpha_interp", 1e-7,
                       low=0.0, high=1e-3),
    "train_cut": Param("train_cut", "float", "training loss above which the bisection counts alpha as not "
                       "interpolating", 1e-9, low=0.0, high=1e-3),
    "mse_cut": Param("mse_cut", "float", "SE test error below which alpha counts as strongly recovered", 1e-6,
                     low=0.0, high=0.1),
    "rtol": Param("rtol", "float", "relative width at which the searches stop", 1e-7, low=0.0, high=0.1),
    "k": K_SETTING,
}

from seqphase.core.quadratic import erm_training  # noqa: E402

_ERM_EXPERIMENT_SETTINGS = {
    "d": Param("d", "int", "input dimension (cost ~ alpha kappa d^4 per gradient)", 60, low=4, high=400,
               low_inclusive=True, high_inclusive=True),
    "n_seeds": Param("n_seeds", "int", "instances (teacher, data, initialisation) per point", 16, low=1,
                     high=10_000, low_inclusive=True),
    "max_iter": Param("max_iter", "int", "L-BFGS-B iterations at most", 20_000, low=1, high=10**6,
                      low_inclusive=True),
    "gtol": Param("gtol", "float", "L-BFGS-B stops when the largest gradient entry is below gtol (1e-7: test "
                  "error stable to 1e-4 relative at d = 50, erm_training.py)", 1e-7, low=0.0, high=1e-2),
}


class ERMExperiment(SeededMethod):
    """The finite-d check of the ERM SE: n_seeds students S = B B^T trained by L-BFGS-B on the SE's loss
    (erm_training.py), with the SE at the point beside them."""

    shared = True

    def layout(self, settings):
        per_seed = ("seed",)
        return Layout({"seed": np.arange(settings["n_seeds"])}, {
            "test_error": Variable(per_seed, "f8", "||S_hat - S*||_F^2 / d (S' units, the SE's test_error)"),
            "test_error_bo": Variable(per_seed, "f8", "kappa_star ||S_hat - S*||_F^2 / d (model quadratic's units)"),
            "train_loss": Variable(per_seed, "f8", "(1/(4n)) sum (y - <X, S_hat>)^2 at the end of training"),
            "loss": Variable(per_seed, "f8", "the minimised objective: train_loss + (lam/d) Tr S_hat"),
            "rank_fraction": Variable(per_seed, "f8", f"eigenvalues of S_hat above {erm_training.RANK_CUT:g} "
                                      "(teacher mean eigenvalue 1), over d"),
            "n_iter": Variable(per_seed, "i4", "L-BFGS-B iterations"),
            "converged": Variable(per_seed, "i1", "1 if L-BFGS-B stopped on gtol or no decrease, 0 at max_iter"),
            "fit_seconds": Variable(per_seed, "f8", "wall time of the fit (machine dependent)"),
            "test_error_se": Variable((), "f8", "SE test_error at the point (erm.erm_state)"),
            "test_error_bo_se": Variable((), "f8", "SE test_error_bo at the point"),
            "train_loss_se": Variable((), "f8", "SE train_loss at the point"),
            "rank_fraction_se": Variable((), "f8", "SE rank_fraction at the point"),
        })

    def check(self, params, settings):
        d = settings["d"]
        erm_training.width(params["kappa"], d)
        erm_training.width(params["kappa_star"], d, "kappa_star")
        erm_training.n_samples(params["alpha"], d)

    def run_seed(self, params, settings, stream):
        self.check(params, settings)
        ks, kappa, delta, lam, alpha = (float(params[k]) for k in ("kappa_star", "kappa", "delta", "lam", "alpha"))
        run = erm_training.run_seed(alpha=alpha, kappa_star=ks, kappa=kappa, delta=delta, lam=lam, d=settings["d"],
                                    seed_sequence=stream, max_iter=settings["max_iter"], gtol=settings["gtol"])
        return {k: run[k] for k in ("test_error", "test_error_bo", "train_loss", "loss", "rank_fraction", "n_iter",
                                    "converged", "fit_seconds")}

    def run_shared(self, params, settings, seed_sequence):
        ks, kappa, delta, lam, alpha = (float(params[k]) for k in ("kappa_star", "kappa", "delta", "lam", "alpha"))
        state = erm_mod.erm_state(alpha, ks, kappa, delta, lam)
        return {"test_error_se": state.test_error, "test_error_bo_se": state.test_error_bo,
                "train_loss_se": state.train_loss, "rank_fraction_se": state.rank_fraction}

    def figure(self, plt, ds, companions):
        return figures.plot_erm_experiment(plt, ds, companions)


class QuadraticERMModel(Model):
    """ERM with weight decay of the quadratic network (nuclear-norm sensing on the PSD cone): a table of
    parameters and methods. Loss, units and outputs: erm.py's docstring."""

    def __init__(self):
        super().__init__(
            name="quadratic-erm",
            description="ERM with weight decay of the extensive-width quadratic network: teacher width "
                        "kappa_star d, student width kappa d, n = alpha d^2, label-noise variance delta, loss "
                        "(1/(4n)) sum (y - <X, S>)^2 + (lam/d) Tr S, S = W^T W/m",
            params={
                "alpha": Param("alpha", "float", "sample complexity n/d^2", REQUIRED, low=0.0),
                "kappa_star": Param("kappa_star", "float", "teacher width ratio m*/d", 0.5, low=0.0),
                "kappa": Param("kappa", "float", "student width ratio m/d (>= 1: convex; < 1: rank cap)", 2.0,
                               low=0.0),
                "delta": Param("delta", "float", "label-noise variance (S' label units, erm.py)", 0.0, low=0.0,
                               low_inclusive=True),
                "lam": Param("lam", "float", "weight decay lam in (lam/d) Tr S (0: the limit lam -> 0+)", 0.0,
                             low=0.0, low_inclusive=True),
            },
            methods={
                "se": ERMSE(_ERM_SE_SETTINGS, version=1, doc="ERM state evolution (xi-continuation, spec §2)"),
                "threshold": ERMThreshold(_ERM_THRESHOLD_SETTINGS, version=2,
                                          doc="alpha_interp and alpha_SR, dedicated equation and bisection (v2: "
                                              "a graph of tasks, the bisections as k-sections of probes)",
                                          excludes=("alpha", "lam")),
                "experiment": ERMExperiment(_ERM_EXPERIMENT_SETTINGS, version=1,
                                            doc="finite-d L-BFGS-B training over seeds against the SE"),
            },
        )

    def check_point(self, method, params):
        return erm_mod.check_covered(params, method)
