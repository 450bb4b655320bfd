"""The papers of the aim family that `seqphase reproduce` covers (aim): each `Paper` names the shipped
sweeps that reproduce it, the figure each reproduces and its reduced `--quick` grid (`seqphase.sweeps.papers`).
Its agreement checks are in checks.py."""

from seqphase.sweeps.papers import Paper, Run

PAPERS = (
    Paper(
        id="aim", title="Bayes optimal learning of attention-indexed models",
        authors="Boncoraglio, Troiani, Erba, Zdeborová", arxiv="2506.01582", venue="NeurIPS 2025",
        docs="docs/validation/aim.md",
        runs=(
            Run("aim-softmax-se", "Fig. 2 left: softmax error versus alpha, the k_T alpha collapse",
                quick=("rho=0.1,0.5,1.0", "alpha=0.001:0.28:32"), why_quick="3 rho, 32 alphas (6, 128)"),
            Run("aim-softmax-se", "Fig. 2 left on the published alpha grid (rho = 0.5, T = 2)", name="aim-softmax-se-published",
                full=("rho=0.5", "T=2"), published_grid=("aim", "SE_softmax_T=2_rho=0.5.csv", "alpha", 8),
                why_quick="every 8th published alpha"),
            Run("aim-hardmax-se", "Fig. 1 left: hardmax, exact and published g_out",
                quick=("rho=0.5", "alpha=0.02,0.05,0.1,0.2,0.35,0.5,1,2,3,5,7,10"), why_quick="rho = 0.5, 12 alphas (5 rho, 32)"),
            Run("aim-hardmax-se", "Fig. 1 left on the published alpha grid (rho = 0.5)", name="aim-hardmax-se-published",
                full=("rho=0.5",), published_grid=("aim", "SE_hardmax_rho=0.5.csv", "alpha", 16),
                why_quick="every 16th published alpha"),
            Run("aim-linear-se", "Fig. 3: the linear baseline", quick=("rho=0.5", "alpha=0.001:0.19:24"),
                why_quick="rho = 0.5, 24 alphas (6, 96)"),
            Run("aim-small-width", "Fig. 1 right: small width", quick=("alpha_bar=0.1,0.2,0.4,0.7,1,1.5,2,3,5,8,12,20",),
                why_quick="12 alpha_bar (48)"),
            Run("aim-thresholds", "counting thresholds alpha_c(rho, T)", quick=("rho=0.5,1.0", "T=2,3"),
                why_quick="2 rho x 2 T (6 x 5)"),
            Run("aim-gamp", "Fig. 1 left AMP points, Fig. 2 right",
                quick=("method.d=60", "method.n_seeds=4", "alpha=0.1,1.0"),
                why_quick="d = 60, 4 seeds, 2 alphas (d = 100, 16 seeds, 5 alphas)"),
            Run("aim-gamp-hardmax", "GAMP with the exact and the published hardmax g_out",
                quick=("method.d=60", "method.n_seeds=4", "alpha=1.0"),
                why_quick="d = 60, 4 seeds, alpha = 1 (d = 100, 16, 4 alphas)"),
            Run("aim-gamp-tokens", "Fig. 4: T = 4 and 5",
                quick=("method.d=60", "method.n_seeds=4", "alpha=0.012", "T=4"),
                why_quick="d = 60, 4 seeds, T = 4, 1 alpha (d = 120, 16, T = 4 and 5, 4)"),
            Run("aim-gd", "Fig. 2 right: GD and averaged GD",
                quick=("method.d=30", "method.n_seeds=3", "method.n_students=8", "method.steps=300",
                       "alpha=0.075,0.225"),
                why_quick="d = 30, 3 seeds, 8 students, 300 steps, 2 alphas (50, 16, 32, 1000, 6)"),
        )),
)
