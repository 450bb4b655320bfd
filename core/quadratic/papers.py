"""The papers of the quadratic family that `seqphase reproduce` covers (quadratic, erm): each `Paper` names the shipped
sweeps that reproduce it, the figure each reproduces and its reduced `--quick` grid (`seqphase.sweeps.papers`).
Its agreement checks are in checks.py."""

from seqphase.sweeps.papers import Paper, Run

PAPERS = (
    Paper(
        id="quadratic", title="Bayes-optimal learning of an extensive-width neural network from quadratically "
        "many samples", authors="Maillard, Troiani, Martin, Krzakala, Zdeborová", arxiv="2408.03733",
        venue="NeurIPS 2024", docs="docs/validation/quadratic.md",
        runs=(
            Run("quadratic-se", "Bayes-optimal MMSE versus alpha (kappa, Delta axes)",
                quick=("kappa=0.2,0.5,1.0", "alpha=0.001:0.6:32"), why_quick="3 kappa, 32 alphas (5, 128)"),
            Run("quadratic-se", "MMSE at kappa = 0.5 on the published alpha grid (noiseless)",
                name="quadratic-se-published", full=("kappa=0.5", "delta=0"),
                published_grid=("quadratic", "line_no_noise_0.5.csv", "alpha", 8), why_quick="every 8th published alpha"),
            Run("quadratic-se", "MMSE at kappa = 0.5 on the published alpha grid (Delta = 0.25)",
                name="quadratic-se-published-noisy", full=("kappa=0.5", "delta=0.25"),
                published_grid=("quadratic", "line_noise_0.5_0.25.csv", "alpha", 8),
                why_quick="every 8th published alpha"),
            Run("quadratic-thresholds", "perfect recovery alpha_PR(kappa)", quick=("kappa=0.2,0.5,2.0",),
                why_quick="3 kappa (11)"),
            Run("quadratic-gamp", "GAMP-RIE against the SE (kappa = 0.5)",
                quick=("method.d=50", "method.n_seeds=4", "alpha=0.15,0.3,0.45"),
                why_quick="d = 50, 4 seeds, 3 alphas (d = 100, 16, 18)"),
            Run("quadratic-gd", "GD and averaged GD (kappa = 0.5)",
                quick=("method.d=30", "method.n_seeds=3", "method.n_students=6", "method.steps=400",
                       "alpha=0.1,0.308"),
                why_quick="d = 30, 3 instances, 6 students, 400 steps, 2 alphas (50, 16, 16, 1000, 5)"),
        )),
    Paper(
        id="erm", title="The nuclear route: sharp asymptotics of ERM in overparameterized quadratic networks",
        authors="Erba, Troiani, Zdeborová, Krzakala", arxiv="2505.17958", venue="preprint 2025",
        docs="docs/validation/quadratic-erm.md",
        runs=(
            Run("quadratic-erm-se", "test error, training loss and rank versus alpha",
                quick=("kappa_star=0.5", "lam=0.1", "alpha=0.02:0.8:12"),
                why_quick="kappa* = 0.5, lambda = 0.1, 12 alphas (2, 2, 40)"),
            Run("quadratic-erm-thresholds", "interpolation and strong-recovery thresholds",
                quick=("kappa_star=0.25,0.5,1.0",), why_quick="3 kappa* (6)"),
            Run("quadratic-erm-experiment", "finite-d L-BFGS against the SE",
                quick=("method.d=30", "method.n_seeds=4", "kappa=2.0", "delta=0", "alpha=0.15,0.5"),
                why_quick="d = 30, 4 seeds, kappa = 2, noiseless, 2 alphas (60, 16, 2, 2, 6)"),
        )),
)
