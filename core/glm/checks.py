"""The agreement checks of the paper glm (`seqphase reproduce glm`): the thresholds against the numbers the
papers quote, GAMP against the SE."""

from __future__ import annotations

from seqphase.core.agreement import FiniteDBias, Row, select, seed_mean_rows

GLM_GAMP_BIAS = FiniteDBias(5.0, "docs/validation/glm.md, Values: the allowance 0.005 at d = 1000 of the GAMP test")


def glm_rows(results, reference):
    rows = []
    ds = results.get("glm-binary-perceptron-thresholds")
    if ds is not None:
        sub = select(ds, transition="perfect")
        alpha_it = float(sub["alpha_it"].values.ravel()[0])
        rows.append(Row("binary perceptron", "information-theoretic threshold, Györgyi (1990)", "alpha_IT",
                        alpha_it, 1.245, 5e-4, "half a unit of the last digit quoted (1.245)"))
        rows.append(Row("binary perceptron", "information-theoretic threshold, as arXiv:1708.03395 quotes it",
                        "alpha_IT", alpha_it, 1.249, 5e-4, "half a unit of the last digit quoted (1.249)",
                        explanation=("docs/validation/glm.md", "Binary perceptron α_IT: 1.2447, not the 1.249 quoted in "
                                     "arXiv:1708.03395")))
        rows.append(Row("binary perceptron", "AMP spinodal (stability)", "alpha_alg",
                        float(sub["alpha_stability"].values.ravel()[0]), 1.493, 5e-4, "digits quoted in the paper"))
    ds = results.get("glm-phase-retrieval-thresholds")
    if ds is not None:
        for channel in ds["channel"].values:
            weak = select(ds, channel=channel, transition="weak")
            perfect = select(ds, channel=channel, transition="perfect")
            rows.append(Row("real phase retrieval", f"channel {channel}, weak recovery (stability)", "alpha",
                            float(weak["alpha_stability"].values.ravel()[0]), 0.5, 1e-6,
                            "closed form 1/2: quadrature accuracy"))
            rows.append(Row("real phase retrieval", f"channel {channel}, AMP perfect recovery (stability)", "alpha",
                            float(perfect["alpha_stability"].values.ravel()[0]), 1.13, 5e-3,
                            "digits quoted in the paper"))
    ds = results.get("glm-cs-thresholds")
    if ds is not None:
        tramp = {0.1: 0.20753, 0.2: 0.35597, 0.25: 0.42042, 0.3: 0.48096, 0.5: 0.68604, 0.75: 0.88038}
        for rho in ds["rho"].values:
            if float(rho) in tramp:
                value = float(select(ds, rho=rho, transition="perfect")["alpha_stability"].values.ravel()[0])
                rows.append(Row("compressed sensing", f"rho = {rho:g}", "AMP threshold (stability)", value,
                                tramp[float(rho)], 1e-3, "Tree-AMP's published critical line: its alpha_tol 1e-3"))
    ds = results.get("glm-perceptron-gamp")
    if ds is not None:
        rows += seed_mean_rows("GAMP", "Gaussian perceptron, GAMP final overlap vs SE", ds.isel(row=0, col=0),
                               "overlap", "overlap_se", "overlap", GLM_GAMP_BIAS)
    return rows


CHECKS = {"glm": glm_rows}
