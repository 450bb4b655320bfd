"""The papers of the multiindex family that `seqphase reproduce` covers (multiindex): each `Paper` names the shipped
sweeps that reproduce it, the figure each reproduces and its reduced `--quick` grid (`seqphase.sweeps.papers`).
Its agreement checks are in checks.py."""

from seqphase.sweeps.papers import Paper, Run

PAPERS = (
    Paper(
        id="multiindex", title="Fundamental computational limits of weak learnability in high-dimensional "
        "multi-index models", authors="Troiani, Dandi, Defilippis, Zdeborová, Loureiro, Krzakala",
        arxiv="2405.15480", venue="AISTATS 2025", docs="docs/validation/multiindex.md",
        runs=(
            Run("multiindex-thresholds", "weak-learnability thresholds and grand-staircase stages",
                quick=("channel=square,z1z2,sign-z1z2",), why_quick="3 of the 8 channels (z², z1z2, sign(z1z2))"),
            Run("multiindex-norm2-thresholds", "||z||^2 in p = 1, 2, 3 dims (alpha_c = p/2)"),
            Run("multiindex-staircase-se", "SE overlaps of z1^2 + sign(z1 z2 z3) across its stages",
                quick=("alpha=0.4,1.2,2.4,3.6", "method.n_mc=1000"),
                why_quick="4 alphas, 1000 Monte-Carlo draws (20 alphas, 4000 draws)"),
            Run("multiindex-gamp", "GAMP on z1 z2 and sign(z1 z2) against the SE",
                quick=("method.d=200", "method.n_seeds=4", "method.max_iter=60", "alpha=1.5,4"),
                why_quick="d = 200, 4 seeds, 60 iterations, 2 alphas (d = 1000, 16 seeds, 200, 4)"),
        )),
)
