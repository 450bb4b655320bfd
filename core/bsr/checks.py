"""The agreement checks of the paper bsr (`seqphase reproduce bsr`): the SE's Bayes-optimal error and ridge
baseline beside the published beta = 1 curves (reference/), GAMP-RIE against the SE."""

from __future__ import annotations

import numpy as np

from seqphase.core.agreement import FiniteDBias, curve_rows, curve_xy, seed_mean_rows
from seqphase.core.bsr import thresholds as bsr_thresholds

BSR_GAMP_BIAS = FiniteDBias(1.0, "docs/validation/bsr.md, GAMP-RIE: largest |GAMP - SE| 0.010 over the d = 100 table")


def bsr_rows(results, reference):
    rows = []
    ds = results.get("bsr-se")
    explain = ("docs/validation/bsr.md", "Our β = 1 values beside the reference files (core/bsr/reference/, Δ = 0)")
    if ds is not None and 1.0 in ds["beta"].values and 0.0 in ds["delta"].values:
        pub = reference["Fig1_delta_0.0_beta_1.0_rho_0.1-0.2-0.5-1.0-2.0_alpha_0.0_0.005_1.0.csv"]
        for rho in ds["rho"].values:
            keep = np.isclose(pub["rho"], rho)
            if not keep.any():
                continue
            x, y = curve_xy(ds, "mse", rho=rho, beta=1.0, delta=0.0)
            a_pr = bsr_thresholds.alpha_pr(float(rho), 1.0)
            rows += curve_rows("Fig. 1", f"rho = {rho:g}, beta = 1, noiseless", "Bayes-optimal error mse", x, y,
                               pub["alpha"][keep], pub["mmse"][keep], 1e-5,
                               "accuracy of the authors' fixed-point iteration (docs/validation/bsr.md)",
                               special=lambda a, a_pr=a_pr: abs(a - a_pr) < 1e-9, explanation=explain)
            x, y = curve_xy(ds, "mse_ridge", rho=rho, beta=1.0, delta=0.0)
            rows += curve_rows("Fig. 1", f"rho = {rho:g}, ridge baseline", "optimal ridge error", x, y,
                               pub["alpha"][keep], pub["mse_ridge_opt"][keep], 1e-12, "closed form: float rounding")
    ds = results.get("bsr-gamp")
    if ds is not None:
        rows += seed_mean_rows("GAMP-RIE", "GAMP final error vs SE", ds, "mse", "mse_se", "mse", BSR_GAMP_BIAS)
    return rows


CHECKS = {"bsr": bsr_rows}
