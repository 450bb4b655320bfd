"""The generalised linear model: y ~ P_out(. | z), z = F x, x_i ~ P0 i.i.d., F_ij ~ N(0, 1/d).

Registry name "glm". Parameters: `prior` (gaussian, rademacher, gauss-bernoulli), `channel` (linear,
sign, abs, square), `rho` (Gauss-Bernoulli density; 1 for the other priors), `delta` (label-noise
variance of the linear channel), `alpha` = n/d (not a parameter of threshold sweeps, which compute it).

Methods:
- "se": Bayes-optimal state evolution from an uninformed start (the AMP branch) and an informed start;
  the Bayes-optimal branch is the one of larger free entropy (first-order transitions are resolved by
  comparing free entropies, not by which start one happened to use).
- "gamp": GAMP on `n_seeds` instances of dimension `d`, per-iteration overlaps and errors, plus the SE
  prediction of the AMP branch at the same point for comparison.
- "threshold": critical alphas, each two independent ways: `weak` recovery (linear stability of the
  uninformative fixed point versus SE bisection with small side information) and `perfect` recovery
  (AMP spinodal from the parametric fixed-point curve versus SE bisection), plus the
  information-theoretic threshold from the free-entropy crossing.
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core import gamp as gamp_mod
from seqphase.core import se as se_mod
from seqphase.core import thresholds
from seqphase.core.channels import CHANNELS
from seqphase.core.errors import ParameterError
from seqphase.core.models import REQUIRED, Layout, Method, Model, Param, Variable
from seqphase.core.priors import PRIORS

_P = 1  # scalar GLM: the overlap is a 1 x 1 matrix, stored with the same (row, col) dims as p x p models

_SE_SETTINGS = {
    "damping": Param("damping", "float", "weight of the old iterate in x <- (1-d) step(x) + d x",
                     0.0, low=0.0, high=1.0, low_inclusive=True, high_inclusive=False),
    "tol": Param("tol", "float", "stop when max |change of the MSE| < tol", 1e-10, low=0.0, high=1e-2),
    "max_iter": Param("max_iter", "int", "iteration cap of each SE run", 2000, low=1, high=1_000_000,
                      low_inclusive=True),
}

_GAMP_SETTINGS = {
    "d": Param("d", "int", "dimension of the instances", 1000, low=10, high=100_000, low_inclusive=True),
    "n_seeds": Param("n_seeds", "int", "instances per point", 16, low=1, high=4096, low_inclusive=True),
    "max_iter": Param("max_iter", "int", "GAMP iterations (the trace is forward-filled after convergence)",
                      100, low=1, high=10_000, low_inclusive=True),
    "damping": Param("damping", "float", "GAMP damping", 0.0, low=0.0, high=1.0, low_inclusive=True,
                     high_inclusive=False),
    "tol": Param("tol", "float", "stop when the estimate moves less than tol (rms)", 1e-8, low=0.0, high=1e-1),
}

_THRESHOLD_SETTINGS = {
    "transitions": Param("transitions", "choices", "which transitions to locate (a grid dim)", ["weak"],
                         choices=("weak", "perfect")),
    "alpha_lo": Param("alpha_lo", "float", "lower end of the bisection bracket", 0.01, low=0.0),
    "alpha_hi": Param("alpha_hi", "float", "upper end of the bisection bracket", 5.0, low=0.0),
    "rtol": Param("rtol", "float", "relative width at which bisections stop", 1e-4, low=0.0, high=0.1),
    "side_info": Param("side_info", "float", "side-information SNR lambda of the weak-recovery bisection",
                       1e-10, low=0.0, high=1e-2),
    "overlap_cut": Param("overlap_cut", "float", "overlap above which weak recovery counts as achieved",
                         1e-4, low=0.0, high=0.5),
    "mse_cut_fraction": Param("mse_cut_fraction", "float",
                              "MSE/rho below which perfect recovery counts as achieved", 1e-3, low=0.0, high=0.5),
    "it_threshold": Param("it_threshold", "bool", "also locate the free-entropy (information-theoretic) "
                          "crossing of a perfect-recovery transition", True),
}


class GLMModel(Model):
    def __init__(self):
        super().__init__(
            name="glm",
            description="generalised linear model: prior x output channel (perceptron, compressed "
                        "sensing, phase retrieval, linear regression)",
            params={
                "alpha": Param("alpha", "float", "sample complexity n/d", REQUIRED, low=0.0),
                "prior": Param("prior", "choice", "prior of the signal", "gaussian", choices=tuple(PRIORS)),
                "channel": Param("channel", "choice", "output channel", "sign", choices=tuple(CHANNELS)),
                "rho": Param("rho", "float", "Gauss-Bernoulli density (1 for other priors)", 1.0,
                             low=0.0, high=1.0),
                "delta": Param("delta", "float", "label-noise variance of the linear channel", 0.0,
                               low=0.0, low_inclusive=True),
            },
            methods={
                "se": Method(_SE_SETTINGS, version=1, doc="state evolution, both branches"),
                "gamp": Method(_GAMP_SETTINGS, version=2,
                               doc="GAMP on finite instances (v2: damping-consistent Onsager term)"),
                "threshold": Method(_THRESHOLD_SETTINGS, version=1, doc="critical alphas, two ways each",
                                    axes={"transition": "transitions"}, excludes=("alpha",)),
            },
        )

    # -- parameters -----------------------------------------------------------------------------
    def check_point(self, method, params):
        if params.get("rho", 1.0) != 1.0 and params["prior"] != "gauss-bernoulli":
            raise ParameterError("params.rho", f"rho={params['rho']} is only used by prior 'gauss-bernoulli'",
                                 "remove rho or set prior = \"gauss-bernoulli\"")
        if params.get("delta", 0.0) != 0.0 and params["channel"] != "linear":
            raise ParameterError("params.delta", f"delta={params['delta']} is only used by channel 'linear'",
                                 "remove delta or set channel = \"linear\"")
        if method == "threshold" and params["channel"] == "linear" and params["prior"] == "gaussian":
            raise ParameterError("params.prior", "a Gaussian prior with a linear channel has no phase "
                                 "transition to locate", "use prior = \"gauss-bernoulli\" (compressed sensing)")
        return params

    @staticmethod
    def build(params):
        """The (prior, channel) pair of a point."""
        prior_cls = PRIORS[params["prior"]]
        prior = prior_cls(params["rho"]) if params["prior"] == "gauss-bernoulli" else prior_cls()
        channel_cls = CHANNELS[params["channel"]]
        channel = channel_cls(params["delta"]) if params["channel"] == "linear" else channel_cls()
        return prior, channel

    # -- layout ---------------------------------------------------------------------------------
    def layout(self, method, settings):
        matrix = ("row", "col")
        if method == "se":
            dims = {"row": np.arange(1, _P + 1), "col": np.arange(1, _P + 1),
                    "se_iteration": np.arange(settings["max_iter"] + 1)}
            variables = {}
            for suffix, what in (("", "Bayes-optimal branch (larger free entropy)"),
                                 ("_amp", "AMP branch (uninformed start)"),
                                 ("_informed", "informed start")):
                variables[f"overlap{suffix}"] = Variable(matrix, "f8", f"overlap m, {what}")
                variables[f"mse{suffix}"] = Variable((), "f8", f"MSE rho - m, {what}")
                variables[f"gen_error{suffix}"] = Variable((), "f8", f"Bayes-optimal test error, {what}")
                variables[f"free_entropy{suffix}"] = Variable((), "f8", f"RS free entropy, {what}")
            for suffix in ("_amp", "_informed"):
                variables[f"n_iter{suffix}"] = Variable((), "i4", "SE iterations run")
                variables[f"converged{suffix}"] = Variable((), "i1", "1 if the SE met its tolerance")
                variables[f"residual{suffix}"] = Variable(("se_iteration",), "f8",
                                                          "convergence log: max |change| per iteration")
            variables["branches_differ"] = Variable((), "i1", "1 if the two starts reach different fixed points")
            return Layout(dims, variables)
        if method == "gamp":
            dims = {"seed": np.arange(settings["n_seeds"]), "iteration": np.arange(settings["max_iter"] + 1),
                    "row": np.arange(1, _P + 1), "col": np.arange(1, _P + 1)}
            traced = ("seed", "iteration")
            variables = {
                "overlap": Variable(traced + matrix, "f8", "overlap x_hat . x* / d per iteration"),
                "self_overlap": Variable(traced + matrix, "f8", "|x_hat|^2 / d per iteration"),
                "mse": Variable(traced, "f8", "|x_hat - x*|^2 / d per iteration"),
                "gen_error": Variable(traced, "f8", "plug-in test error per iteration"),
                "n_iter": Variable(("seed",), "i4", "iterations run (later entries are forward-filled)"),
                "converged": Variable(("seed",), "i1", "1 if GAMP met its tolerance"),
                "overlap_se": Variable(matrix, "f8", "SE prediction (AMP branch) of the overlap"),
                "mse_se": Variable((), "f8", "SE prediction (AMP branch) of the MSE"),
                "gen_error_se": Variable((), "f8", "SE prediction (AMP branch) of the test error"),
            }
            return Layout(dims, variables)
        if method == "threshold":
            variables = {
                "alpha_stability": Variable((), "f8", "weak: linear stability of the uninformative fixed point "
                                            "(0 = trivial, inf = hard); perfect: AMP spinodal from the "
                                            "parametric fixed-point curve"),
                "alpha_bisection": Variable((), "f8", "bisection on alpha of the SE from the uninformed start "
                                            "(with small side information for weak recovery)"),
                "alpha_it": Variable((), "f8", "information-theoretic threshold (free-entropy crossing); "
                                     "NaN for weak recovery"),
                "relative_gap": Variable((), "f8", "|stability - bisection| / stability"),
            }
            return Layout({}, variables)
        raise ParameterError("method.name", f"unknown method {method!r}")

    # -- run ------------------------------------------------------------------------------------
    def run(self, method, params, settings, seed_sequence):
        prior, channel = self.build(params)
        if method == "se":
            return self._run_se(prior, channel, params["alpha"], settings)
        if method == "gamp":
            return self._run_gamp(prior, channel, params["alpha"], settings, seed_sequence)
        return self._run_threshold(prior, channel, params["transition"], settings)

    @staticmethod
    def _se_kwargs(settings):
        return {"damping": settings["damping"], "tol": settings["tol"], "max_iter": settings["max_iter"]}

    def _run_se(self, prior, channel, alpha, settings):
        branches = se_mod.glm_se_branches(prior, channel, alpha, **self._se_kwargs(settings))
        out = {}
        for key, suffix in (("bayes", ""), ("amp", "_amp"), ("informed", "_informed")):
            state = branches[key]
            out[f"overlap{suffix}"] = np.full((_P, _P), state.overlap)
            out[f"mse{suffix}"] = state.mse
            out[f"gen_error{suffix}"] = state.gen_error
            out[f"free_entropy{suffix}"] = state.free_entropy
        n_log = settings["max_iter"] + 1
        for key in ("amp", "informed"):
            state = branches[key]
            out[f"n_iter_{key}"] = state.n_iter
            out[f"converged_{key}"] = int(bool(state.converged))
            log = np.full(n_log, np.nan)
            residuals = np.asarray(state.residuals, dtype=float)[:n_log]
            log[: residuals.size] = residuals
            out[f"residual_{key}"] = log
        gap = abs(branches["amp"].mse - branches["informed"].mse)
        out["branches_differ"] = int(gap > 1e-6 * max(prior.rho, 1e-300))
        return out

    def _run_gamp(self, prior, channel, alpha, settings, seed_sequence):
        n_seeds, n_trace = settings["n_seeds"], settings["max_iter"] + 1
        out = {name: np.full((n_seeds, n_trace) + shape, np.nan) for name, shape in
               (("overlap", (_P, _P)), ("self_overlap", (_P, _P)), ("mse", ()), ("gen_error", ()))}
        out["n_iter"] = np.zeros(n_seeds, dtype=int)
        out["converged"] = np.zeros(n_seeds, dtype=int)
        # One child stream per seed: seed s of a point is the same instance whatever n_seeds is.
        for s, child in enumerate(seed_sequence.spawn(n_seeds)):
            rng = np.random.default_rng(child)
            F, x, y = gamp_mod.sample_instance(prior, channel, alpha, settings["d"], rng)
            trace = gamp_mod.run_gamp(prior, channel, F, y, x, damping=settings["damping"],
                                      max_iter=settings["max_iter"], tol=settings["tol"], rng=rng)
            for name in ("overlap", "self_overlap", "mse", "gen_error"):
                values = _forward_fill(np.asarray(getattr(trace, name), dtype=float), n_trace)
                out[name][s] = values.reshape((n_trace,) + out[name].shape[2:]) if values.ndim == 1 else values
            out["n_iter"][s] = trace.n_iter
            out["converged"][s] = int(bool(trace.converged))
        amp = se_mod.glm_se(prior, channel, alpha, start="uninformed")
        out["overlap_se"] = np.full((_P, _P), amp.overlap)
        out["mse_se"] = amp.mse
        out["gen_error_se"] = amp.gen_error
        return out

    def _run_threshold(self, prior, channel, transition, settings):
        bracket = {"alpha_lo": settings["alpha_lo"], "alpha_hi": settings["alpha_hi"]}
        if settings["alpha_lo"] >= settings["alpha_hi"]:
            raise ParameterError("method.alpha_lo", "alpha_lo must be below alpha_hi")
        alpha_it = math.nan
        if transition == "weak":
            alpha_stability = thresholds.weak_recovery_stability(prior, channel)
            alpha_bisection = thresholds.weak_recovery_bisection(
                prior, channel, side_info=settings["side_info"], overlap_cut=settings["overlap_cut"],
                rtol=settings["rtol"], **bracket)
        else:
            alpha_stability = thresholds.perfect_recovery_spinodal(
                prior, channel, mse_cut_fraction=settings["mse_cut_fraction"])
            alpha_bisection = thresholds.perfect_recovery_bisection(
                prior, channel, mse_cut_fraction=settings["mse_cut_fraction"], rtol=settings["rtol"], **bracket)
            if settings["it_threshold"]:
                alpha_it = thresholds.information_theoretic_threshold(prior, channel, **bracket)
        if alpha_stability in (0.0, math.inf) or not math.isfinite(alpha_bisection):
            gap = 0.0 if alpha_stability == alpha_bisection else math.nan
        else:
            gap = abs(alpha_stability - alpha_bisection) / alpha_stability
        return {"alpha_stability": alpha_stability, "alpha_bisection": alpha_bisection,
                "alpha_it": alpha_it, "relative_gap": gap}


def _forward_fill(trace, length):
    """Pad a per-iteration trace to `length` by repeating its last value (the converged state)."""
    trace = np.asarray(trace, dtype=float)
    if trace.shape[0] >= length:
        return trace[:length]
    pad = np.repeat(trace[-1:], length - trace.shape[0], axis=0)
    return np.concatenate([trace, pad], axis=0)
