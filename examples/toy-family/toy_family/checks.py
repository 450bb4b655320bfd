"""The agreement checks of the paper toy: the stored SE error against the closed form tabulated in
reference/linear-closed-form.csv, at their common alphas."""

import numpy as np

from seqphase.core.agreement import curve_rows, curve_xy


def toy_rows(results, reference):
    rows = []
    ds = results.get("toy-linear-se")
    if ds is None:
        return rows
    table = reference["linear-closed-form.csv"]
    for delta in ds["delta"].values:
        keep = np.isclose(table["delta"], delta)
        x, y = curve_xy(ds, "mse", delta=delta)
        rows += curve_rows("Bayes-optimal error", f"delta = {delta:g}", "mse", x, y, table["alpha"][keep],
                           table["mse"][keep], 1e-9, "the SE stops at |change of V| < 1e-12; the table has 12 digits")
    return rows


CHECKS = {"toy": toy_rows}
