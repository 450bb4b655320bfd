"""The papers of the glm family that `seqphase reproduce` covers (glm): each `Paper` names the shipped
sweeps that reproduce it, the figure each reproduces and its reduced `--quick` grid (`seqphase.sweeps.papers`).
Its agreement checks are in checks.py."""

from seqphase.sweeps.papers import Paper, Run

PAPERS = (
    Paper(
        id="glm", title="Optimal errors and phase transitions in high-dimensional generalized linear models",
        authors="Barbier, Krzakala, Macris, Miolane, Zdeborová", arxiv="1708.03395", venue="PNAS 2019",
        docs="docs/validation/glm.md",
        runs=(
            Run("glm-perceptron-se", "Gaussian-prior perceptron, overlap and Bayes-optimal error",
                quick=("alpha=0.1:10:25",), why_quick="25 alphas instead of 100"),
            Run("glm-perceptron-gamp", "GAMP against SE (perceptron)",
                quick=("method.d=300", "method.n_seeds=6", "alpha=0.5,2"),
                why_quick="d = 300, 6 seeds, 2 alphas (d = 1000, 16 seeds, 5 alphas)"),
            Run("glm-binary-perceptron-se", "binary perceptron, both branches", quick=("alpha=0.05:2:14",),
                why_quick="14 alphas instead of 40"),
            Run("glm-binary-perceptron-thresholds", "binary perceptron: alpha_IT and the AMP spinodal"),
            Run("glm-phase-retrieval-thresholds", "real phase retrieval: weak and perfect recovery"),
            Run("glm-cs-thresholds", "compressed sensing: AMP threshold versus rho",
                quick=("rho=0.25,0.5",), why_quick="rho = 0.25, 0.5 (6 rho)"),
        )),
)
