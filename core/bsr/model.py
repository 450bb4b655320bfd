"""Bilinear sequence regression (spec rie_bsr_quadratic.md part A): Bayes-optimal error, baselines and thresholds.

Registry name "bsr". Parameters: `alpha` = n/(dL) (>= 0), `rho` = r/d (> 0), `beta` = L/d (> 0), `delta` =
label-noise VARIANCE (>= 0) in y = <X, S*>/sqrt(dL) + sqrt(delta) z, S* = U* V*^T / sqrt(r) (unit-variance
entries). Errors are per entry, (1/(dL)) ||S_hat - S*||_F^2: 1 at alpha = 0, the test error of a noiseless
label (a noisy label adds delta).

Methods (the science is in se.py, baselines.py and thresholds.py):
- "se": the Bayes-optimal error `mse` of (A.1) (stores written before the one-name convention call it
  `mmse`: results/conventions.py), `zeta` (the effective noise of the denoising step; 0 at
  perfect recovery, inf at alpha = 0), `mse_ridge` (optimal ridge on the vectorised input, the files'
  `mse_ridge_opt`) and `alpha_pr`, the closed-form perfect-recovery threshold of the point's (rho, beta) (NaN
  when delta > 0: no perfect recovery with noise).
- "threshold": alpha_PR(rho, beta) in closed form and by bisection on the noiseless SE error, their relative
  gap, and the minimal nuclear-norm threshold alpha_MNNE(rho, beta) (alpha and delta are not parameters).
- "gamp": GAMP-RIE (gamp.py) on n_seeds instances of token dimension d (L = round(beta d)): the error per
  seed and iteration, GAMP's own prediction mmse_den(zeta), and the SE error of the point.
- "gd": full-batch gradient descent from the prior initialisation and averaged GD (gd.py), per dataset and
  logged step, with the SE error.
- "baselines": the minimal nuclear-norm estimator solved at finite d (nuclear.py, with its duality-gap
  certificate) and finite-d ridge, per seed, beside the asymptotic ridge curve, alpha_MNNE and alpha_PR.
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core.bsr import baselines, figures, nuclear, thresholds
from seqphase.core.bsr import gamp as gamp_mod
from seqphase.core.bsr import gd as gd_mod
from seqphase.core.bsr import se as se_mod
from seqphase.core.bsr.channels import BSRChannel
from seqphase.core.models import REQUIRED, Layout, Method, Model, Param, SeededMethod, Variable
from seqphase.core.numerics import forward_fill
from seqphase.core.search import BISECTION_K_SETTING, relative_gap, threshold_variables

_THRESHOLD_SETTINGS = {
    "mse_cut": Param("mse_cut", "float", "SE error below which the bisection counts alpha as perfectly "
                     "recovered", 1e-4, low=0.0, high=0.1),
    "rtol": Param("rtol", "float", "relative width at which the bisection stops", 1e-9, low=0.0, high=0.1),
    "k": BISECTION_K_SETTING,
}


class SE(Method):
    """Bayes-optimal error at one (alpha, rho, beta, delta): the scalar equation (A.1), with the ridge baseline."""

    def layout(self, settings):
        return Layout({}, {
            "mse": Variable((), "f8", "Bayes-optimal error (1/(dL)) E||S_hat - S*||_F^2 = alpha zeta - delta "
                             "(1 at alpha = 0)"),
            "zeta": Variable((), "f8", "effective noise of the denoising step, alpha zeta = delta + mmse_den(zeta) "
                             "(0 at perfect recovery, inf at alpha = 0)"),
            "mse_ridge": Variable((), "f8", "error of optimal ridge (lambda = delta) on the vectorised input"),
            "alpha_pr": Variable((), "f8", "closed-form perfect-recovery threshold of (rho, beta) (NaN if delta > 0)"),
        })

    def run(self, params, settings, seed_sequence):
        alpha, rho, beta, delta = params["alpha"], params["rho"], params["beta"], params["delta"]
        state = se_mod.bo_state(alpha, rho, beta, delta)
        return {"mse": state.mmse, "zeta": state.zeta, "mse_ridge": float(baselines.mse_ridge(alpha, delta)),
                "alpha_pr": thresholds.alpha_pr(rho, beta) if delta == 0 else math.nan}

    def figure(self, plt, ds, companions):
        return figures.plot_se(plt, ds, companions)


class Threshold(Method):
    """alpha_PR(rho, beta) two ways and alpha_MNNE(rho, beta) (noiseless)."""

    def layout(self, settings):
        return Layout({}, {
            **threshold_variables("alpha_closed_form", "rho (1 + beta - rho)/beta (rho < min(1, beta)), else 1",
                                  "smallest alpha with noiseless SE error < mse_cut"),
            "alpha_mnne": Variable((), "f8", "minimal nuclear-norm perfect-recovery threshold "
                                   "(Donoho-Gavish-Montanari)"),
        })

    def tasks(self, params, settings, seed_sequence):
        """The point as a graph: the bisection on the SE in rounds of k probes (`search.section_search`, the
        bisection placement: the serial bisection's value whatever k); the closed form and alpha_MNNE here."""
        rho, beta = params["rho"], params["beta"]
        closed = thresholds.alpha_pr(rho, beta)
        bisection, _, _ = yield from thresholds.alpha_pr_bisection_route(
            rho, beta, mse_cut=settings["mse_cut"], rtol=settings["rtol"], k=settings["k"])
        return {"alpha_closed_form": closed, "alpha_bisection": bisection,
                "relative_gap": relative_gap(closed, bisection), "alpha_mnne": thresholds.alpha_mnne(rho, beta)}

    def figure(self, plt, ds, companions):
        return figures.plot_thresholds(plt, ds, companions)


_GAMP_SETTINGS = {
    "d": Param("d", "int", "token dimension d of the instances (L = round(beta d); the paper: 100)", 100, low=2,
               high=2000, low_inclusive=True),
    "n_seeds": Param("n_seeds", "int", "instances per point", 16, low=1, high=4096, low_inclusive=True),
    "max_iter": Param("max_iter", "int", "GAMP iterations (the trace is forward-filled after the stop)", 200,
                      low=1, high=100_000, low_inclusive=True),
    "damping": Param("damping", "float", "weight of the old estimate and variance (omega and V are damped with "
                     "it; undamped runs from the spec's start collapse)", 0.5, low=0.0, high=1.0,
                     low_inclusive=True, high_inclusive=False),
    "tol": Param("tol", "float", "stop when ||S_hat_t - S_hat_{t-1}||_F^2 / (dL) < tol", 1e-6, low=0.0, high=1.0),
    "init_variance": Param("init_variance", "float", "starting variance C_0 of the prior-sample start (spec: "
                           "scale = 20; the start's true error is 2)", 20.0, low=0.0),
    "precision": Param("precision", "choice", "floating point of the stored inputs X (float32: 4 n d L bytes, "
                       "400 MB at d = L = 100, alpha = 1)", "float32", choices=gamp_mod.PRECISIONS),
}


class _FiniteD(SeededMethod):
    """A method on finite instances of token dimension `d` (setting), over `n_seeds` instances (the sizes
    must be >= 1), with the SE error and other closed forms of the point as shared outputs."""

    shared = True

    def check(self, params, settings):
        gamp_mod.sizes(params["alpha"], params["rho"], params["beta"], settings["d"])

    def point(self, params, settings):
        """(alpha, rho, beta, delta, channel) of a checked point."""
        self.check(params, settings)
        return params["alpha"], params["rho"], params["beta"], params["delta"], BSRChannel(params["delta"])


class GAMP(_FiniteD):
    """GAMP-RIE on `n_seeds` instances (d x L, L = round(beta d)) at one point, with the SE error (spec A3)."""

    def layout(self, settings):
        dims = {"seed": np.arange(settings["n_seeds"]), "iteration": np.arange(settings["max_iter"] + 1)}
        traced = ("seed", "iteration")
        return Layout(dims, {
            "mse": Variable(traced, "f8", "error ||S_hat - S*||_F^2 / (dL) per iteration (0 = the prior-sample "
                            "start; forward-filled after the stop)"),
            "mse_predicted": Variable(traced, "f8", "GAMP's own error prediction mmse_den(zeta) per iteration"),
            "zeta": Variable(traced, "f8", "effective denoising noise 1/A = 1/(alpha mean g^2) per iteration"),
            "n_iter": Variable(("seed",), "i4", "iterations run"),
            "converged": Variable(("seed",), "i1", "1 if the change fell below tol (or C collapsed)"),
            "diverged": Variable(("seed",), "i1", "1 if g or the estimate became non-finite"),
            "mse_se": Variable((), "f8", "SE (Bayes-optimal) error at the same point"),
        })

    def run_seed(self, params, settings, stream):
        alpha, rho, beta, delta, channel = self.point(params, settings)
        n_trace = settings["max_iter"] + 1
        trace = gamp_mod.run_seed(channel, alpha, rho, beta, settings["d"], stream,
                                  precision=settings["precision"], init_variance=settings["init_variance"],
                                  max_iter=settings["max_iter"], damping=settings["damping"], tol=settings["tol"])
        out = {name: forward_fill(getattr(trace, name), n_trace) for name in ("mse", "mse_predicted", "zeta")}
        out.update(n_iter=trace.n_iter, converged=int(trace.converged), diverged=int(trace.diverged))
        return out

    def run_shared(self, params, settings, seed_sequence):
        alpha, rho, beta, delta, _ = self.point(params, settings)
        return {"mse_se": se_mod.bo_state(alpha, rho, beta, delta).mmse}

    def figure(self, plt, ds, companions):
        return figures.plot_gamp(plt, ds, companions)


_GD_SETTINGS = {
    "d": Param("d", "int", "token dimension d (L = round(beta d))", 40, low=2, high=1000, low_inclusive=True),
    "n_seeds": Param("n_seeds", "int", "datasets (teacher + training set) per point (spec AGD: 4)", 4, low=1,
                     high=10_000, low_inclusive=True),
    "n_students": Param("n_students", "int", "students per dataset (independent prior initialisations, same "
                        "data); AGD averages their S (spec: 64)", 32, low=1, high=10_000, low_inclusive=True),
    "steps": Param("steps", "int", "full-batch gradient-descent steps (spec: 50000)", 5000, low=1, high=10**7,
                   low_inclusive=True),
    "lr": Param("lr", "float", "learning rate of plain GD on sum (y_hat - y)^2 / 4 (spec: 0.1)", 0.1, low=0.0),
    "log_every": Param("log_every", "int", "steps between logged errors (step 0 and the last always)", 100,
                       low=1, high=10**7, low_inclusive=True),
}


class GD(_FiniteD):
    """Full-batch GD and averaged GD (prior initialisation) against the Bayes-optimal error (spec A4)."""

    def layout(self, settings):
        return Layout({"seed": np.arange(settings["n_seeds"]),
                       "epoch": gd_mod.logged_steps(settings["steps"], settings["log_every"])}, {
            "mse_gd": Variable(("seed", "epoch"), "f8", "GD error ||S - S*||_F^2 / (dL) of single students, "
                               "averaged over the students of the dataset"),
            "mse_agd": Variable(("seed", "epoch"), "f8", "AGD error ||mean_i S_i - S*||_F^2 / (dL)"),
            "train_loss": Variable(("seed", "epoch"), "f8", "training MSE sum (y_hat - y)^2 / n, mean over "
                                   "students"),
            "n_diverged": Variable(("seed",), "i4", "students whose loss became non-finite (left out)"),
            "mse_se": Variable((), "f8", "Bayes-optimal (SE) error at the point"),
        })

    def run_seed(self, params, settings, stream):
        alpha, rho, beta, delta, channel = self.point(params, settings)
        run = gd_mod.run_seed(channel, alpha=alpha, rho=rho, beta=beta, d=settings["d"],
                              n_students=settings["n_students"], steps=settings["steps"], lr=settings["lr"],
                              log_every=settings["log_every"], seed_sequence=stream)
        return {name: run[name] for name in ("mse_gd", "mse_agd", "train_loss", "n_diverged")}

    def run_shared(self, params, settings, seed_sequence):
        alpha, rho, beta, delta, _ = self.point(params, settings)
        return {"mse_se": se_mod.bo_state(alpha, rho, beta, delta).mmse}

    def figure(self, plt, ds, companions):
        return figures.plot_gd(plt, ds, companions)


_BASELINES_SETTINGS = {
    "d": Param("d", "int", "token dimension d of the finite-d estimators (L = round(beta d); spec: <= 20 for "
               "the MNNE)", 15, low=2, high=200, low_inclusive=True),
    "n_seeds": Param("n_seeds", "int", "instances per point", 16, low=1, high=4096, low_inclusive=True),
    "tol": Param("tol", "float", "MNNE stop: relative duality gap and consensus residual below tol", 1e-6,
                 low=0.0, high=0.1),
    "max_iter": Param("max_iter", "int", "MNNE ADMM iteration cap", 20000, low=10, high=10**7,
                      low_inclusive=True),
}


class Baselines(_FiniteD):
    """Finite-d minimal nuclear-norm estimator and ridge, with their asymptotic curves (spec A4)."""

    def layout(self, settings):
        per_seed = ("seed",)
        return Layout({"seed": np.arange(settings["n_seeds"])}, {
            "mse_mnne": Variable(per_seed, "f8", "MNNE error ||S_hat - S*||_F^2 / (dL) at finite d"),
            "mnne_gap": Variable(per_seed, "f8", "relative duality gap of the returned MNNE (a certificate)"),
            "mnne_residual": Variable(per_seed, "f8", "relative constraint residual ||A(S_hat) - y|| / ||y||"),
            "mnne_converged": Variable(per_seed, "i1", "1 if gap and consensus met tol"),
            "mse_ridge_finite": Variable(per_seed, "f8", "ridge (lambda = delta) error at finite d"),
            "mse_ridge": Variable((), "f8", "asymptotic ridge error (baselines.mse_ridge)"),
            "alpha_mnne": Variable((), "f8", "asymptotic MNNE perfect-recovery threshold of (rho, beta)"),
            "alpha_pr": Variable((), "f8", "Bayes-optimal perfect-recovery threshold of (rho, beta)"),
            "mse_se": Variable((), "f8", "Bayes-optimal (SE) error at the point"),
        })

    def run_seed(self, params, settings, stream):
        alpha, rho, beta, delta, channel = self.point(params, settings)
        d = settings["d"]
        X, S_true, y = gamp_mod.sample_instance(channel, alpha, rho, beta, d, stream, "float64")
        L = S_true.shape[1]
        A = nuclear.measurement(X, d, L)
        mnne = nuclear.min_nuclear_norm(A, y, d, L, tol=settings["tol"], max_iter=settings["max_iter"])
        return {"mse_mnne": nuclear.per_entry_error(mnne.S, S_true), "mnne_gap": mnne.gap,
                "mnne_residual": mnne.residual, "mnne_converged": int(mnne.converged),
                "mse_ridge_finite": nuclear.per_entry_error(nuclear.ridge(A, y, delta, d, L), S_true)}

    def run_shared(self, params, settings, seed_sequence):
        alpha, rho, beta, delta, _ = self.point(params, settings)
        return {"mse_ridge": float(baselines.mse_ridge(alpha, delta)), "alpha_mnne": float(baselines.alpha_mnne(rho, beta)),
                "alpha_pr": float(thresholds.alpha_pr(rho, beta)),
                "mse_se": se_mod.bo_state(alpha, rho, beta, delta).mmse}

    def figure(self, plt, ds, companions):
        return figures.plot_baselines(plt, ds, companions)


class BSRModel(Model):
    """Bilinear sequence regression: a table of parameters and methods."""

    def __init__(self):
        super().__init__(
            name="bsr",
            description="bilinear sequence regression: L x d Gaussian inputs, a rank-rho d target S*, "
                        "n = alpha d L samples, label-noise variance delta",
            params={
                "alpha": Param("alpha", "float", "sample ratio n/(dL)", REQUIRED, low=0.0, low_inclusive=True),
                "rho": Param("rho", "float", "rank ratio r/d", 0.5, low=0.0),
                "beta": Param("beta", "float", "aspect ratio L/d (sequence length per token dimension)", 1.0,
                              low=0.0),
                "delta": Param("delta", "float", "label-noise variance (y = <X, S*>/sqrt(dL) + sqrt(delta) z)",
                               0.0, low=0.0, low_inclusive=True),
            },
            methods={
                "se": SE({}, version=1, doc="Bayes-optimal error from the scalar equation (spec A2), with the "
                         "optimal ridge baseline"),
                "threshold": Threshold(_THRESHOLD_SETTINGS, version=1,
                                       doc="perfect-recovery alpha_PR(rho, beta), closed form and SE bisection; "
                                           "minimal nuclear-norm alpha_MNNE", excludes=("alpha", "delta"),
                                       later_settings=("k",)),
                "gamp": GAMP(_GAMP_SETTINGS, version=1, doc="GAMP-RIE on finite instances (spec A3), damped, "
                             "against the SE"),
                "gd": GD(_GD_SETTINGS, version=1, doc="full-batch GD and averaged GD from the prior "
                         "initialisation (spec A4), against the SE"),
                "baselines": Baselines(_BASELINES_SETTINGS, version=1, doc="finite-d minimal nuclear-norm "
                                       "estimator (ADMM) and ridge, with their asymptotic curves (spec A4)"),
            },
        )
