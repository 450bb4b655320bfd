"""Multi-index models y = g(W x / sqrt d), W in R^{p x d} with Gaussian prior N(0, I_p) columns.

Registry name "multiindex". Parameters: `channel` (see `core/multiindex/channels.py`: "z1z2",
"sign-z1z2", "norm2", "z1z2z3", "sign-z1z2z3", "committee3", "staircase", "square", "abs"; or a user
plug-in "module:Class", a `seqphase.Likelihood` with p = 2, derived by quadrature in
`core/multiindex/plugin_channel.py`, its constructor keywords becoming parameters), `p`
(only for "norm2": ||z||^2 in p dims, 1 <= p <= 3; leave it at its default 0 = "not used" for the
other channels), `alpha` (> 0; not for threshold sweeps).

Stored p x p variables are padded to P_MAX = 3 (rows/cols beyond the channel's p are NaN), so the
extra dims `row`, `col` have a size known from the settings alone and channels of different p can
share one sweep. `stage` (threshold method) has `max_stages` entries (default 3), padded with NaN.

Methods:
- "se": p x p SE (Monte Carlo with common random numbers) from the uninformed start (Q0 = 1e-4 I,
  "amp") and an informed start (Q0 = (1 - 1e-3) I); `overlap` is the branch of larger overlap trace
  (the free entropy is not computed for multi-index channels); gen_error by Monte Carlo.
- "gamp": GAMP on `n_seeds` instances of dimension d; per-iteration overlap M = W_hat W*^T / d and
  self-overlap; SE prediction of the AMP branch.
- "threshold": the grand staircase: per stage, alpha by linear stability (trivial 0 / easy 1/lambda
  / hard inf / first-order jump) and by SE bisection with small side information, the dimension and
  projector of the subspace learned after that stage, and the stage kind.

Each method is a `Method` object below (`SE`, `GAMP`, `Threshold`) carrying its layout, the code of one
point and its figure (`core/multiindex/figures.py`); `MultiIndexModel` only declares the parameters,
the methods and the check of a point.
"""

from __future__ import annotations

import numpy as np

from seqphase.core import gamp, onset, plugins
from seqphase.core.errors import ParameterError
from seqphase.core.models import DERIVED_SETTING, REQUIRED, Layout, Method, Model, Param, SeededMethod, Variable
from seqphase.core.multiindex import figures
from seqphase.core.multiindex import gamp as mgamp
from seqphase.core.multiindex import se as mse
from seqphase.core.multiindex import thresholds as mth
from seqphase.core.multiindex.channels import MI_CHANNELS, P_MAX, make_channel
from seqphase.core.multiindex import plugin_channel
from seqphase.core.multiindex.plugin_channel import DerivedVectorChannel
from seqphase.core.numerics import forward_fill, nan_log, pad_matrix
from seqphase.core.search import K_SETTING, check_bracket, relative_gap, threshold_variables

_SE = {
    "damping": Param("damping", "float", "weight of the old iterate", 0.3, low=0.0, high=1.0,
                     low_inclusive=True, high_inclusive=False),
    "tol": Param("tol", "float", "stop when max |change of Q| < tol", 1e-6, low=0.0, high=1e-2),
    "max_iter": Param("max_iter", "int", "iteration cap of each SE run", 200, low=1, high=100_000,
                      low_inclusive=True),
    "n_mc": Param("n_mc", "int", "Monte Carlo samples (common random numbers)", 4000, low=100,
                  high=10_000_000, low_inclusive=True),
    "derived": DERIVED_SETTING,
}
_GAMP = {
    "d": Param("d", "int", "dimension", 1000, low=10, high=100_000, low_inclusive=True),
    "n_seeds": Param("n_seeds", "int", "instances per point", 16, low=1, high=4096, low_inclusive=True),
    "max_iter": Param("max_iter", "int", "GAMP iterations", 60, low=1, high=10_000, low_inclusive=True),
    "damping": Param("damping", "float", "GAMP damping", 0.0, low=0.0, high=1.0, low_inclusive=True,
                     high_inclusive=False),
    "tol": Param("tol", "float", "stop when the estimate moves less than tol (rms)", 1e-6, low=0.0, high=1e-1),
    "side_info": Param("side_info", "float", "side-information SNR lambda", 0.0, low=0.0, high=1.0,
                       low_inclusive=True),
    "variance": Param("variance", "choice", "GAMP variance update (core/multiindex/gamp.py): auto = Nishimori, "
                      "analytic total precision once 1 - V >= 0.9", "auto",
                      choices=("auto", "nishimori", "analytic")),
    "derived": DERIVED_SETTING,
}
# the sequential design of core/onset.py, on request: the grid stays the default (the stored points'), and
# seeds are added only where a spec sets alpha_se (no stopping rule: run_instance runs to tol or the cap)
_DESIGN = onset.design_settings({"alpha": 0.0}, default="grid", stopping=False)
_ONSET = {**onset.ONSET_SETTINGS, **onset.window_settings("alpha", 0.3, 1.2, 10),
          **{k: v for k, v in _GAMP.items() if k not in ("d", "n_seeds")},
          "max_iter": Param("max_iter", "int", "GAMP iterations at most (stops earlier at tol)", 200, low=1,
                            high=10_000, low_inclusive=True), **_DESIGN}

_THR = {
    "max_stages": Param("max_stages", "int", "length of the stage dim (NaN-padded)", 3, low=1, high=10,
                        low_inclusive=True),
    "alpha_lo": Param("alpha_lo", "float", "lower end of the bisection bracket", 0.05, low=0.0),
    "alpha_hi": Param("alpha_hi", "float", "upper end of the bisection bracket", 20.0, low=0.0),
    "rtol": Param("rtol", "float", "relative width at which bisections stop", 1e-3, low=0.0, high=0.1),
    "side_info": Param("side_info", "float", "side information lambda of the bisection SE", 1e-12,
                       low=0.0, high=1e-3, low_inclusive=True),
    "bisection": Param("bisection", "bool", "also locate every threshold by SE bisection", True),
    "k": K_SETTING,
    "derived": DERIVED_SETTING,
}


#: quadrature resolution of the isotropic SE per channel (relative error of qhat < 1e-3 for q <= 0.6,
#: measured against n_gh 20 / doubled y-rule density; see docs/validation/multiindex.md). z1 z2: 1 - q below 1e-5 counts as
#: perfect recovery (the rule's noise floor in 1 - q is ~1e-6, where alpha = 3 used to spend 19 of 46 iterations)
ISO_SE = {"z1z2": dict(n_gh=12, res=1.0, tol=1e-6, q_perfect=1 - 1e-5), "sign-z1z2": dict(n_gh=40, tol=1e-8)}


def channel_of(params, settings=None):
    """The channel of a point ("norm2" takes p; p = 0 means "not used"), or a user plug-in
    ("module:Class", core/plugins.py) built with its constructor keywords from the point's parameters and
    derived by quadrature (`plugin_channel.DerivedVectorChannel`). Every channel is a
    `seqphase.Likelihood`; the setting ``derived`` runs a shipped one through the derived route, its closed
    forms left aside."""
    if params["channel"] in MI_CHANNELS:
        channel = make_channel(params["channel"], params.get("p") or None)
        if (settings or {}).get("derived"):
            refuse_underivable(channel)
            channel = DerivedVectorChannel(channel, name=params["channel"])
        return channel
    return DerivedVectorChannel(plugins.for_point(params, "channel"), name=params["channel"])


def check_derived(params, settings):
    """``derived = true`` needs a shipped channel with a finite likelihood and p = 2: a noiseless one (y a
    function of z with a continuous y: z1 z2, norm2, ...) has closed forms only, and the route integrates
    over z in two dimensions."""
    if (settings or {}).get("derived") and params["channel"] in MI_CHANNELS:
        refuse_underivable(make_channel(params["channel"], params.get("p") or None))


def refuse_underivable(channel):
    """ParameterError (one line) for a shipped channel the derived route cannot run (`check_derived`)."""
    if channel.noiseless:
        raise ParameterError("method.derived", f"channel {channel.name!r} is noiseless: it has no finite "
                             "likelihood to derive from", "set derived = false, or run its noisy form "
                             "y = f(z) + sqrt(delta) n as a plug-in")
    if channel.p != 2:
        raise ParameterError("method.derived", f"channel {channel.name!r} has p = {channel.p}; the derived "
                             "route of the multi-index family is for p = 2", "set derived = false")


_MATRIX = ("row", "col")


def _matrix_dims():
    """The p x p variables of every channel share one (row, col) layout of size P_MAX."""
    return {"row": np.arange(1, P_MAX + 1), "col": np.arange(1, P_MAX + 1)}


class SE(Method):
    """p x p SE (Monte Carlo, common random numbers) from the uninformed and the informed start; the
    stored `overlap` is the branch of larger trace."""

    def layout(self, settings):
        dims = dict(_matrix_dims(), se_iteration=np.arange(settings["max_iter"] + 1))
        v = {}
        for suf, what in (("", "branch of larger overlap trace"), ("_amp", "uninformed start"),
                          ("_informed", "informed start")):
            v[f"overlap{suf}"] = Variable(_MATRIX, "f8", f"overlap Q (p x p, NaN-padded), {what}")
            v[f"gen_error{suf}"] = Variable((), "f8", f"Bayes-optimal test error (MC), {what}")
        for suf in ("_amp", "_informed"):
            v[f"n_iter{suf}"] = Variable((), "i4", "SE iterations run")
            v[f"converged{suf}"] = Variable((), "i1", "1 if the SE met its tolerance")
            v[f"residual{suf}"] = Variable(("se_iteration",), "f8", "max |change of Q| per iteration")
        v["branches_differ"] = Variable((), "i1", "1 if the two starts reach different overlaps")
        return Layout(dims, v)

    def check(self, params, settings):
        check_derived(params, settings)

    def run(self, params, settings, seed_sequence):
        ch, alpha = channel_of(params, settings), params["alpha"]
        rng = np.random.default_rng(seed_sequence)
        expect = mse.Expectation(ch, "mc", n_mc=settings["n_mc"], rng=rng)
        kw = dict(damping=settings["damping"], tol=settings["tol"], max_iter=settings["max_iter"], expect=expect)
        amp = mse.mi_se(ch, alpha, Q0=1e-4 * np.eye(ch.p), **kw)
        inf = mse.mi_se(ch, alpha, Q0=(1 - 1e-3) * np.eye(ch.p), **kw)
        out = {}
        errs = {}
        for key, st in (("amp", amp), ("informed", inf)):
            out[f"overlap_{key}"] = pad_matrix(st.Q, P_MAX)
            errs[key] = mse.gen_error_mc(ch, st.Q, rng=np.random.default_rng(seed_sequence.spawn(1)[0]))
            out[f"gen_error_{key}"] = errs[key]
            out[f"n_iter_{key}"] = st.n_iter
            out[f"converged_{key}"] = int(st.converged)
            out[f"residual_{key}"] = nan_log(st.residuals, settings["max_iter"] + 1)
        best = "amp" if np.trace(amp.Q) >= np.trace(inf.Q) - 1e-6 else "informed"
        out["overlap"] = out[f"overlap_{best}"]
        out["gen_error"] = errs[best]
        out["branches_differ"] = int(abs(np.trace(amp.Q) - np.trace(inf.Q)) > 1e-3 * ch.p)
        return out

    def figure(self, plt, ds, companions):
        return figures.plot_se(plt, ds)


def gamp_instance(params, settings, alpha, d, stream):
    """GAMP on one instance drawn from `stream` (the gamp and onset methods' instance): its trace."""
    ch = channel_of(params, settings)
    rng = np.random.default_rng(stream)
    X, W, y = mgamp.sample_instance(ch, alpha, d, rng)
    steps = mgamp.MISteps(ch, X, y, W, side_info=settings["side_info"], rng=rng, variance=settings["variance"])
    return gamp.iterate(steps, max_iter=settings["max_iter"], damping=settings["damping"], tol=settings["tol"])


class GAMP(SeededMethod):
    """GAMP on `n_seeds` instances of dimension d (per-iteration M and self-overlap, forward-filled
    after the stop), and the SE prediction of the AMP branch."""

    shared = True

    def layout(self, settings):
        dims = dict(seed=np.arange(settings["n_seeds"]), iteration=np.arange(settings["max_iter"] + 1),
                    **_matrix_dims())
        t = ("seed", "iteration")
        return Layout(dims, {
            "overlap": Variable(t + _MATRIX, "f8", "M = W_hat W*^T / d per iteration"),
            "self_overlap": Variable(t + _MATRIX, "f8", "W_hat W_hat^T / d per iteration"),
            "n_iter": Variable(("seed",), "i4", "iterations run (then forward-filled)"),
            "converged": Variable(("seed",), "i1", "1 if GAMP met its tolerance"),
            "overlap_se": Variable(_MATRIX, "f8", "SE prediction (uninformed start) of Q"),
        })

    def run_seed(self, params, settings, stream):
        n_trace = settings["max_iter"] + 1
        tr = gamp_instance(params, settings, params["alpha"], settings["d"], stream)
        return {"overlap": pad_matrix(forward_fill(tr.overlap, n_trace), P_MAX),
                "self_overlap": pad_matrix(forward_fill(tr.self_overlap, n_trace), P_MAX),
                "n_iter": tr.n_iter, "converged": int(tr.converged)}

    def check(self, params, settings):
        check_derived(params, settings)

    def run_shared(self, params, settings, seed_sequence):
        ch, alpha = channel_of(params, settings), params["alpha"]
        out = {}
        if ch.name in ISO_SE:  # deterministic SE on Q = q I (the SE fixed point is isotropic here)
            q, _ = mse.iso_se(ch, alpha, **ISO_SE[ch.name])
            out["overlap_se"] = pad_matrix(q * np.eye(ch.p), P_MAX)
        else:  # Monte Carlo SE (4000 samples): indicative only, +-0.02 seed-to-seed
            se_state = mse.mi_se(ch, alpha, damping=0.3, tol=1e-6, max_iter=300,
                                 expect=mse.Expectation(ch, "mc", n_mc=4000, rng=np.random.default_rng(seed_sequence)))
            out["overlap_se"] = pad_matrix(se_state.Q, P_MAX)
        return out

    def figure(self, plt, ds, companions):
        return figures.plot_gamp(plt, ds, companions.get("se_sweep"))


class Onset(onset.OnsetMethod):
    """The weak-learnability onset by GAMP at several sizes (core/onset.py): the mean singular value of the
    final p x p overlap M = W_hat W*^T / d (blind to the rotation and signs a symmetric channel leaves)."""

    observables = ("overlap",)
    transitions = {"alpha": "overlap"}

    def check(self, params, settings):
        super().check(params, settings)
        check_derived(params, settings)

    def run_instance(self, params, settings, alpha, d, stream):
        tr = gamp_instance(params, settings, alpha, d, stream)
        return {"overlap": float(np.linalg.svd(np.atleast_2d(tr.overlap[-1]), compute_uv=False).mean()),
                "n_iter": tr.n_iter, "converged": int(tr.converged)}


def threshold_work(params, what, derived=False, **kwargs):
    """One work of a threshold point (`mth.stage_work` on the point's channel)."""
    return mth.stage_work(channel_of(params, {"derived": derived}), what, **kwargs)


class Threshold(Method):
    """The grand staircase of a channel: per stage, stability and SE-bisection alphas, the learned
    subspace and the stage kind (NaN-padded to `max_stages`)."""

    def layout(self, settings):
        dims = dict(stage=np.arange(1, settings["max_stages"] + 1), **_matrix_dims())
        return Layout(dims, {
            **threshold_variables("alpha_stability", "linear stability (0 trivial, inf hard)",
                                  "SE bisection with small side information", dims=("stage",)),
            "subspace_dim": Variable(("stage",), "f8", "dimension of the subspace learned after the stage"),
            "stage_kind": Variable(("stage",), "f8", "0 trivial, 1 easy, 2 hard, 3 first-order jump"),
            "projector": Variable(("stage",) + _MATRIX, "f8", "projector onto the learned subspace"),
        })

    def check(self, params, settings):
        check_bracket(settings)
        check_derived(params, settings)

    def tasks(self, params, settings, seed_sequence):
        """The point as a graph (version 2, `mth.staircase_route`): the stability work, then the SE
        bisections side by side as k-sections of probes."""
        self.check(params, settings)
        ch = channel_of(params, settings)
        derived = {"derived": True} if settings["derived"] else {}  # the stored works' arguments unchanged

        def make(what, **kwargs):
            return threshold_work, dict(kwargs, params=params, what=what, **derived)

        stages = yield from mth.staircase_route(ch, make, alpha_lo=settings["alpha_lo"], alpha_hi=settings["alpha_hi"],
                                                rtol=settings["rtol"], side_info=settings["side_info"],
                                                bisection=settings["bisection"], k=settings["k"])
        S = settings["max_stages"]
        if len(stages) > S:
            raise ParameterError("method.max_stages", f"channel {ch.name!r} has {len(stages)} stages",
                                 f"set max_stages >= {len(stages)}")
        out = {k: np.full(S, np.nan) for k in ("alpha_stability", "alpha_bisection", "subspace_dim",
                                                "stage_kind", "relative_gap")}
        out["projector"] = np.full((S, P_MAX, P_MAX), np.nan)
        for i, st in enumerate(stages):
            out["alpha_stability"][i] = st.alpha_stability
            out["alpha_bisection"][i] = st.alpha_bisection
            out["subspace_dim"][i] = st.subspace_dim
            out["stage_kind"][i] = st.kind
            out["relative_gap"][i] = relative_gap(st.alpha_stability, st.alpha_bisection)
            out["projector"][i] = pad_matrix(st.projector, P_MAX)
        return out

    def figure(self, plt, ds, companions):
        return figures.plot_threshold(plt, ds)


class MultiIndexModel(Model):
    """The multi-index family: a table of parameters and methods (the methods' code is in the classes
    above)."""

    def __init__(self):
        super().__init__(
            name="multiindex",
            description="multi-index models y = g(W x / sqrt d) with Gaussian prior: p x p SE, GAMP, "
                        "weak-learnability thresholds and the grand staircase",
            params={
                "alpha": Param("alpha", "float", "sample complexity n/d", REQUIRED, low=0.0),
                "channel": Param("channel", "choice", "multi-index channel", "z1z2", choices=tuple(MI_CHANNELS),
                                 plugin="channel"),
                "p": Param("p", "int", "number of indices of 'norm2' (0 = not used)", 0, low=0, high=P_MAX,
                           low_inclusive=True),
            },
            methods={
                "se": SE(_SE, version=1, doc="p x p state evolution, two starts", later_settings=("derived",)),
                "gamp": GAMP(_GAMP, version=3, doc="GAMP with p x p Onsager terms (v2: damping-consistent "
                                                   "Onsager term; v3: variance update auto, no V -> 0 runaway)",
                             later_settings=("derived",)),
                "threshold": Threshold(_THR, version=2, doc="grand staircase, two ways per stage (v2: a graph of "
                                                        "tasks, the bisections as k-sections of probes)",
                                       excludes=("alpha",), later_settings=("derived",)),
                "onset": Onset(_ONSET, version=2, doc="weak-learnability onset by GAMP at several sizes d, "
                               "extrapolated d -> infinity (v2: diverged GAMP runs left out of the rule)",
                               excludes=("alpha",), later_settings=tuple(_DESIGN) + ("derived",)),
            },
        )

    def check_point(self, method, params):
        ch, p = params.get("channel"), params.get("p", 0)
        if ch not in MI_CHANNELS:  # a user plug-in: its p is its class's; NaN, wrong shapes: one line, now
            if p != 0:
                raise ParameterError("params.p", f"p={p} is only used by channel 'norm2'",
                                     "remove p (a plug-in declares its own p)")
            plugin = plugins.for_point(params, "channel")
            plugin_channel.dimension(plugin)
            plugins.smoke_test(plugin, "channel")
            return params
        if ch == "norm2" and p == 0:
            raise ParameterError("params.p", "channel 'norm2' needs p", f"set p in 1..{P_MAX}")
        if ch != "norm2" and p != 0:
            raise ParameterError("params.p", f"p={p} is only used by channel 'norm2'", "remove p")
        if ch == "norm2" and p == 3 and method in ("se", "gamp", "onset"):
            raise ParameterError("params.p", "g_out of norm2 is implemented for p <= 2 (quadrature budget)",
                                 "use p = 1 or 2 for se/gamp (p = 3 is available for threshold)")
        return params
