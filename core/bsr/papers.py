"""The papers of the bsr family that `seqphase reproduce` covers (bsr): each `Paper` names the shipped
sweeps that reproduce it, the figure each reproduces and its reduced `--quick` grid (`seqphase.sweeps.papers`).
Its agreement checks are in checks.py."""

from seqphase.sweeps.papers import Paper, Run

PAPERS = (
    Paper(
        id="bsr", title="Bilinear sequence regression: a model for learning from long sequences of "
        "high-dimensional tokens", authors="Erba, Troiani, Biggio, Maillard, Zdeborová", arxiv="2410.18858",
        venue="PRX 2025", docs="docs/validation/bsr.md",
        runs=(
            Run("bsr-se", "Fig. 1: Bayes-optimal error versus alpha (beta = 1, noiseless), beta and noise panels",
                quick=("rho=0.2,0.5", "beta=1", "delta=0,0.5", "alpha=0:1:11"),
                why_quick="rho = 0.2, 0.5, beta = 1, 11 alphas on the published grid (4 rho, 3 beta, 81)"),
            Run("bsr-thresholds", "perfect-recovery threshold alpha_PR and alpha_MNNE",
                quick=("rho=0.2,0.5", "beta=1,2"), why_quick="2 rho x 2 beta (8 x 4)"),
            Run("bsr-gamp", "GAMP-RIE against the SE",
                quick=("method.d=30", "method.n_seeds=4", "rho=0.5", "alpha=0.4,0.8", "method.max_iter=100"),
                why_quick="d = 30, 4 seeds, rho = 0.5, 2 alphas, 100 iterations (d = 100, 16, 2 rho, 4, 200)"),
            Run("bsr-gd", "GD and averaged GD",
                quick=("method.d=16", "method.n_seeds=2", "method.n_students=8", "method.steps=500",
                       "alpha=0.2,0.5"),
                why_quick="d = 16, 2 datasets, 8 students, 500 steps, 2 alphas (40, 4, 32, 3000, 4)"),
            Run("bsr-baselines", "minimal nuclear-norm estimator and ridge",
                quick=("method.d=8", "method.n_seeds=4", "rho=0.5", "alpha=0.3,0.6,0.9"),
                why_quick="d = 8, 4 seeds, rho = 0.5, 3 alphas (20, 16, 2, 13)"),
        )),
)
