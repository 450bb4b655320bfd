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

from seqphase.core import gamp, onset, plugins
from seqphase.core.errors import ParameterError
from seqphase.core.glm import figures
from seqphase.core.glm import gamp as gamp_mod
from seqphase.core.glm import se as se_mod
from seqphase.core.glm import thresholds
from seqphase.core.glm.channels import CHANNELS
from seqphase.core.glm.priors import PRIORS, DerivedPrior
from seqphase.core.models import DERIVED_SETTING, REQUIRED, Layout, Method, Model, Param, SeededMethod, Variable, Work
from seqphase.core.search import (K_SETTING, check_bracket, relative_gap, section_search, side_by_side, single,
                                  threshold_variables)
from seqphase.core.numerics import forward_fill, nan_log

_P = 1  # scalar GLM: the overlap is a 1 x 1 matrix, stored with the same (row, col) dims as p x p models

#: every method's switch of the closed forms (core/plugins.py, core/glm/priors.py)
DERIVED = DERIVED_SETTING

_SE_SETTINGS = {
    "damping": Param("damping", "float", "weight of the old iterate in x <- (1-d) step(x) + d x",
                     0.0, low=0.0, high=1.0, low_inclusive=True, high_inclusive=False),
    "tol": Param("tol", "float", "stop when max |change of the MSE| < tol", 1e-10, low=0.0, high=1e-2),
    "max_iter": Param("max_iter", "int", "iteration cap of each SE run", 2000, low=1, high=1_000_000,
                      low_inclusive=True),
    "derived": DERIVED,
}

_GAMP_SETTINGS = {
    "d": Param("d", "int", "dimension of the instances", 1000, low=10, high=100_000, low_inclusive=True),
    "n_seeds": Param("n_seeds", "int", "instances per point", 16, low=1, high=4096, low_inclusive=True),
    "max_iter": Param("max_iter", "int", "GAMP iterations (the trace is forward-filled after convergence)",
                      100, low=1, high=10_000, low_inclusive=True),
    "damping": Param("damping", "float", "GAMP damping", 0.0, low=0.0, high=1.0, low_inclusive=True,
                     high_inclusive=False),
    "tol": Param("tol", "float", "stop when the estimate moves less than tol (rms)", 1e-8, low=0.0, high=1e-1),
    "derived": DERIVED,
}

# the sequential design of core/onset.py, on request: the grid stays the default (the stored points'), and
# seeds are added only where a spec sets alpha_se (no stopping rule: run_instance runs to tol or the cap)
_DESIGN = onset.design_settings({"alpha": 0.0}, default="grid", stopping=False)
_ONSET_SETTINGS = {**onset.ONSET_SETTINGS, **onset.window_settings("alpha", 0.3, 1.0, 15),
                   **{k: v for k, v in _GAMP_SETTINGS.items() if k not in ("d", "n_seeds")}, **_DESIGN}

_THRESHOLD_SETTINGS = {
    "transitions": Param("transitions", "choices", "which transitions to locate (a grid dim)", ["weak"],
                         choices=("weak", "perfect")),
    "alpha_lo": Param("alpha_lo", "float", "lower end of the search bracket", 0.01, low=0.0),
    "alpha_hi": Param("alpha_hi", "float", "upper end of the search bracket", 5.0, low=0.0),
    "rtol": Param("rtol", "float", "relative width at which the searches stop", 1e-4, low=0.0, high=0.1),
    "side_info": Param("side_info", "float", "side-information SNR lambda of the weak-recovery bisection",
                       1e-10, low=0.0, high=1e-2),
    "overlap_cut": Param("overlap_cut", "float", "overlap above which weak recovery counts as achieved",
                         1e-4, low=0.0, high=0.5),
    "mse_cut_fraction": Param("mse_cut_fraction", "float",
                              "MSE/rho below which perfect recovery counts as achieved", 1e-3, low=0.0, high=0.5),
    "it_threshold": Param("it_threshold", "bool", "also locate the free-entropy (information-theoretic) "
                          "crossing of a perfect-recovery transition", True),
    "it_rtol": Param("it_rtol", "float", "relative width at which the information-theoretic search stops "
                     "(version 1: fixed at 1e-5)", 1e-5, low=0.0, high=0.1),
    "k": K_SETTING,
    "derived": DERIVED,
}


def build(params, settings=None):
    """The (prior, channel) pair of a point: a shipped one by name, or a user plug-in ("module:Class",
    core/plugins.py) built with its constructor keywords from the point's parameters. Both are
    `seqphase.Prior` / `seqphase.Likelihood` objects; the setting ``derived`` runs a shipped one through the
    derived route (`DerivedPrior`, `plugins.DerivedScalarChannel`), its closed forms left aside."""
    derived = bool((settings or {}).get("derived", False))
    if params["prior"] in PRIORS:
        prior_cls = PRIORS[params["prior"]]
        prior = prior_cls(params["rho"]) if params["prior"] == "gauss-bernoulli" else prior_cls()
        if derived:
            prior = DerivedPrior(prior, name=params["prior"])
    else:
        prior = DerivedPrior(plugins.for_point(params, "prior"), name=params["prior"])
    if params["channel"] in CHANNELS:
        channel_cls = CHANNELS[params["channel"]]
        channel = channel_cls(params["delta"]) if params["channel"] == "linear" else channel_cls()
        if derived:
            channel = plugins.DerivedScalarChannel(channel, name=params["channel"])
    else:
        channel = plugins.DerivedScalarChannel(plugins.for_point(params, "channel"), name=params["channel"])
    return prior, channel


_SHIPPED = {"prior": PRIORS, "channel": CHANNELS}


def check_derived(params, settings):
    """``derived = true`` needs a channel with a finite likelihood: a noiseless one with a continuous y
    (abs, square, linear at delta = 0) has closed forms only."""
    if settings.get("derived") and params["channel"] in CHANNELS:
        channel = build({**params, "prior": "gaussian"})[1]
        if channel.noiseless:
            raise ParameterError("method.derived", f"channel {params['channel']!r}"
                                 f"{' at delta = 0' if params['channel'] == 'linear' else ''} is noiseless: it has "
                                 "no finite likelihood to derive from",
                                 "set derived = false, or give the channel label noise (a plug-in, or linear "
                                 "with delta > 0)")


def _plugin_keywords(params, kind):
    """The constructor keywords of the point's plug-in `kind` (empty for a shipped one)."""
    if params[kind] in _SHIPPED[kind]:
        return set()
    return set(plugins.parameters(plugins.load(params[kind], kind).cls, f"params.{kind}"))


_MATRIX = ("row", "col")


def _matrix_dims():
    return {"row": np.arange(1, _P + 1), "col": np.arange(1, _P + 1)}


class SE(Method):
    """Bayes-optimal SE from the uninformed and informed starts; the Bayes-optimal branch has the larger
    free entropy."""

    def check(self, params, settings):
        check_derived(params, settings)

    def layout(self, settings):
        dims = dict(_matrix_dims(), se_iteration=np.arange(settings["max_iter"] + 1))
        variables = {}
        for suffix, what in (("", "Bayes-optimal branch (larger free entropy)"),
                             ("_amp", "AMP branch (uninformed start)"),
                             ("_informed", "informed start")):
            variables[f"overlap{suffix}"] = Variable(_MATRIX, "f8", f"overlap m, {what}")
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

    def run(self, params, settings, seed_sequence):
        prior, channel = build(params, settings)
        branches = se_mod.glm_se_branches(prior, channel, params["alpha"], damping=settings["damping"],
                                          tol=settings["tol"], max_iter=settings["max_iter"])
        out = {}
        for key, suffix in (("bayes", ""), ("amp", "_amp"), ("informed", "_informed")):
            state = branches[key]
            out[f"overlap{suffix}"] = np.full((_P, _P), state.overlap)
            out[f"mse{suffix}"] = state.mse
            out[f"gen_error{suffix}"] = state.gen_error
            out[f"free_entropy{suffix}"] = state.free_entropy
        for key in ("amp", "informed"):
            state = branches[key]
            out[f"n_iter_{key}"] = state.n_iter
            out[f"converged_{key}"] = int(bool(state.converged))
            out[f"residual_{key}"] = nan_log(state.residuals, settings["max_iter"] + 1)
        gap = abs(branches["amp"].mse - branches["informed"].mse)
        out["branches_differ"] = int(gap > 1e-6 * max(prior.rho, 1e-300))
        return out

    def figure(self, plt, ds, companions):
        return figures.plot_se(plt, ds)


def gamp_instance(params, settings, alpha, d, stream):
    """GAMP on one instance drawn from `stream` (the gamp and onset methods' instance): its trace."""
    prior, channel = build(params, settings)
    rng = np.random.default_rng(stream)
    F, x, y = gamp_mod.sample_instance(prior, channel, alpha, d, rng)
    return gamp.iterate(gamp_mod.GLMSteps(prior, channel, F, y, x, rng), damping=settings["damping"],
                        max_iter=settings["max_iter"], tol=settings["tol"])


class GAMP(SeededMethod):
    """GAMP on `n_seeds` instances of dimension d, with the SE prediction of the AMP branch."""

    shared = True

    def check(self, params, settings):
        check_derived(params, settings)

    def layout(self, settings):
        dims = {"seed": np.arange(settings["n_seeds"]), "iteration": np.arange(settings["max_iter"] + 1),
                **_matrix_dims()}
        traced = ("seed", "iteration")
        return Layout(dims, {
            "overlap": Variable(traced + _MATRIX, "f8", "overlap x_hat . x* / d per iteration"),
            "self_overlap": Variable(traced + _MATRIX, "f8", "|x_hat|^2 / d per iteration"),
            "mse": Variable(traced, "f8", "|x_hat - x*|^2 / d per iteration"),
            "gen_error": Variable(traced, "f8", "plug-in test error per iteration"),
            "n_iter": Variable(("seed",), "i4", "iterations run (later entries are forward-filled)"),
            "converged": Variable(("seed",), "i1", "1 if GAMP met its tolerance"),
            "overlap_se": Variable(_MATRIX, "f8", "SE prediction (AMP branch) of the overlap"),
            "mse_se": Variable((), "f8", "SE prediction (AMP branch) of the MSE"),
            "gen_error_se": Variable((), "f8", "SE prediction (AMP branch) of the test error"),
        })

    def run_seed(self, params, settings, stream):
        n_trace = settings["max_iter"] + 1
        trace = gamp_instance(params, settings, params["alpha"], settings["d"], stream)
        out = {}
        for name, shape in (("overlap", (_P, _P)), ("self_overlap", (_P, _P)), ("mse", ()), ("gen_error", ())):
            values = forward_fill(np.asarray(getattr(trace, name), dtype=float), n_trace)
            out[name] = values.reshape((n_trace,) + shape) if values.ndim == 1 else values
        out["n_iter"] = trace.n_iter
        out["converged"] = int(bool(trace.converged))
        return out

    def run_shared(self, params, settings, seed_sequence):
        prior, channel = build(params, settings)
        amp = se_mod.glm_se(prior, channel, params["alpha"], start="uninformed")
        return {"overlap_se": np.full((_P, _P), amp.overlap), "mse_se": amp.mse, "gen_error_se": amp.gen_error}

    def figure(self, plt, ds, companions):
        return figures.plot_gamp(plt, ds, companions.get("se_sweep"))


def stability_route(params, settings):
    """The stability value of a threshold point (one work): linear stability of m = 0 (weak) or the AMP
    spinodal of the parametric fixed-point curve (perfect)."""
    prior, channel = build(params, settings)
    if params["transition"] == "weak":
        return thresholds.weak_recovery_stability(prior, channel)
    return thresholds.perfect_recovery_spinodal(prior, channel, mse_cut_fraction=settings["mse_cut_fraction"])


def threshold_probe(route, params, settings, alpha):
    """One probe of a threshold search (one work): the predicate of `route` ("weak", "perfect": the SE
    bisections' criteria; "it": the informed branch's free entropy wins) at one alpha."""
    prior, channel = build(params, settings)
    if route == "weak":
        return thresholds.weak_recovered(prior, channel, alpha, side_info=settings["side_info"],
                                         overlap_cut=settings["overlap_cut"])
    if route == "perfect":
        return thresholds.perfect_recovered(prior, channel, alpha, mse_cut_fraction=settings["mse_cut_fraction"])
    if route == "it":
        return thresholds.informed_wins(prior, channel, alpha)
    raise ValueError(f"unknown threshold route {route!r}")


class Threshold(Method):
    """Critical alphas, two independent ways each (stability and SE bisection), plus the
    information-theoretic threshold of a perfect-recovery transition."""

    def layout(self, settings):
        return Layout({}, {
            **threshold_variables("alpha_stability", "weak: linear stability of the uninformative fixed point "
                                  "(0 = trivial, inf = hard); perfect: AMP spinodal from the parametric "
                                  "fixed-point curve", "bisection on alpha of the SE from the uninformed start "
                                  "(with small side information for weak recovery)"),
            "alpha_it": Variable((), "f8", "information-theoretic threshold (free-entropy crossing); "
                                 "NaN for weak recovery"),
        })

    def check(self, params, settings):
        check_bracket(settings)
        check_derived(params, settings)

    def tasks(self, params, settings, seed_sequence):
        """The point as a graph (version 2): the stability route (one work) and the SE searches side by
        side, each search in rounds of k probes (`search.section_search`, one SE run a probe; the IT
        crossing's probe runs both starts)."""
        self.check(params, settings)
        lo, hi, k = settings["alpha_lo"], settings["alpha_hi"], settings["k"]
        transition = params["transition"]
        routes = [single(Work("stability", stability_route, {"params": params, "settings": settings})),
                  section_search("bisection", lambda a: (threshold_probe, {"route": transition, "params": params,
                                                                          "settings": settings, "alpha": a}),
                                 lo, hi, settings["rtol"], k)]
        if transition == "perfect" and settings["it_threshold"]:
            routes.append(section_search("it", lambda a: (threshold_probe, {"route": "it", "params": params,
                                                                          "settings": settings, "alpha": a}),
                                         lo, hi, settings["it_rtol"], k))
        values = yield from side_by_side(routes)
        alpha_stability, (alpha_bisection, _, _) = values[0], values[1]
        alpha_it = values[2][0] if len(values) > 2 else math.nan
        return {"alpha_stability": alpha_stability, "alpha_bisection": alpha_bisection,
                "alpha_it": alpha_it, "relative_gap": relative_gap(alpha_stability, alpha_bisection)}

    def figure(self, plt, ds, companions):
        return figures.plot_threshold(plt, ds)


class Onset(onset.OnsetMethod):
    """The weak-recovery onset by GAMP at several sizes (core/onset.py): |m| = |x_hat . x*| / d."""

    observables = ("overlap",)
    transitions = {"alpha": "overlap"}

    def check(self, params, settings):
        super().check(params, settings)
        check_derived(params, settings)

    def run_instance(self, params, settings, alpha, d, stream):
        trace = gamp_instance(params, settings, alpha, d, stream)
        return {"overlap": abs(float(trace.overlap[-1])), "n_iter": trace.n_iter,
                "converged": int(bool(trace.converged))}


class GLMModel(Model):
    """The GLM: a table of parameters and methods (the methods' code is in the classes above)."""

    def __init__(self):
        super().__init__(
            name="glm",
            description="generalised linear model: prior x output channel (perceptron, compressed "
                        "sensing, phase retrieval, linear regression)",
            params={
                "alpha": Param("alpha", "float", "sample complexity n/d", REQUIRED, low=0.0),
                "prior": Param("prior", "choice", "prior of the signal", "gaussian", choices=tuple(PRIORS),
                               plugin="prior"),
                "channel": Param("channel", "choice", "output channel", "sign", choices=tuple(CHANNELS),
                                 plugin="channel"),
                "rho": Param("rho", "float", "Gauss-Bernoulli density (1 for other priors)", 1.0,
                             low=0.0, high=1.0),
                "delta": Param("delta", "float", "label-noise variance of the linear channel", 0.0,
                               low=0.0, low_inclusive=True),
            },
            methods={
                "se": SE(_SE_SETTINGS, version=1, doc="state evolution, both branches",
                         later_settings=("derived",)),
                "gamp": GAMP(_GAMP_SETTINGS, version=2,
                             doc="GAMP on finite instances (v2: damping-consistent Onsager term)",
                             later_settings=("derived",)),
                "threshold": Threshold(_THRESHOLD_SETTINGS, version=2,
                                       doc="critical alphas, two ways each (v2: a graph of tasks, the SE "
                                           "bisections as k-sections of probes)",
                                       axes={"transition": "transitions"}, excludes=("alpha",),
                                       later_settings=("derived",)),
                "onset": Onset(_ONSET_SETTINGS, version=2, doc="weak-recovery onset by GAMP at several sizes d, "
                               "extrapolated d -> infinity (v2: diverged GAMP runs left out of the rule)",
                               excludes=("alpha",), later_settings=tuple(_DESIGN) + ("derived",)),
            },
        )

    def check_point(self, method, params):
        takes = _plugin_keywords(params, "prior") | _plugin_keywords(params, "channel")
        if params.get("rho", 1.0) != 1.0 and params["prior"] != "gauss-bernoulli" and "rho" not in takes:
            raise ParameterError("params.rho", f"rho={params['rho']} is only used by prior 'gauss-bernoulli'",
                                 "remove rho or set prior = \"gauss-bernoulli\"")
        if params.get("delta", 0.0) != 0.0 and params["channel"] != "linear" and "delta" not in takes:
            raise ParameterError("params.delta", f"delta={params['delta']} is only used by channel 'linear'",
                                 "remove delta or set channel = \"linear\"")
        for kind, shipped in _SHIPPED.items():
            if params[kind] not in shipped:
                plugins.smoke_test(plugins.for_point(params, kind), kind)  # NaN, wrong shapes: one line, before any run
        if method == "threshold" and params["channel"] == "linear" and params["prior"] == "gaussian":
            raise ParameterError("params.prior", "a Gaussian prior with a linear channel has no phase "
                                 "transition to locate", "use prior = \"gauss-bernoulli\" (compressed sensing)")
        return params
