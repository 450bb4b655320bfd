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
"""

from __future__ import annotations

import math

from seqphase.core.errors import ParameterError
from seqphase.core.models import REQUIRED, Layout, Method, Model, Param, Variable
from seqphase.core.quadratic import figures
from seqphase.core.quadratic import se as se_mod
from seqphase.core.quadratic import thresholds

_THRESHOLD_SETTINGS = {
    "mse_cut": Param("mse_cut", "float", "SE error (paper units) below which the bisection counts alpha as "
                     "perfectly recovered", 1e-4, low=0.0, high=0.1),
    "rtol": Param("rtol", "float", "relative width at which the bisection stops", 1e-9, low=0.0, high=0.1),
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
        return Layout({}, {
            "alpha_closed_form": Variable((), "f8", "kappa - kappa^2/2 (kappa < 1), 1/2 (kappa >= 1)"),
            "alpha_bisection": Variable((), "f8", "smallest alpha with noiseless SE error < mse_cut"),
            "relative_gap": Variable((), "f8", "|closed form - bisection| / closed form"),
        })

    def run(self, params, settings, seed_sequence):
        kappa = params["kappa"]
        closed = thresholds.alpha_pr(kappa)
        bisection = thresholds.alpha_pr_bisection(kappa, mse_cut=settings["mse_cut"], rtol=settings["rtol"])
        return {"alpha_closed_form": closed, "alpha_bisection": bisection,
                "relative_gap": thresholds.relative_gap(closed, bisection)}

    def figure(self, plt, ds, companions):
        return figures.plot_thresholds(plt, ds, companions)


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
                                       excludes=("alpha", "delta")),
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
