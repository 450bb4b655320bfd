"""The papers `seqphase reproduce` covers: one entry per paper, with the shipped sweeps that reproduce it.

Each `Paper` names its sweeps (`Run`: a shipped spec, the figure it reproduces, and the `--set` overrides of
its reduced `--quick` grid, the same mechanism as `seqphase run --set`), the docs page that discusses it and
the cost of a reproduction (`Cost`, from sweeps/costs.toml: `seqphase reproduce ID --quick --workers 2`
measured whole, and the full size as the sum of its runs' measured costs, `seqphase.sweeps.costs`). A `Run`
may also take its alpha grid from a published data file (`published_grid`): the agreement table then
compares at the published points themselves, with no interpolation. Quick runs are stored under NAME.quick so that they
never mix with the full-size results.

The agreement checks of each paper are in `results/report.py` (they read the stored results).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from seqphase.core.errors import SeqphaseError
from seqphase.sweeps.costs import Cost, full_cost, quick_cost  # noqa: F401 -- Cost, as before

QUICK_SUFFIX = ".quick"


@dataclass(frozen=True)
class Run:
    """One sweep of a paper: a shipped spec, what it reproduces, and its reduced `--quick` grid."""

    spec: str
    figure: str                 # what it reproduces, e.g. "Fig. 1 (beta = 1, noiseless)"
    quick: tuple = ()           # --set overrides of the --quick size (NAME=VALUES)
    full: tuple = ()            # --set overrides at both sizes (e.g. a companion on a published grid)
    name: str = ""              # stored name at full size (default: the spec's)
    published_grid: tuple = ()  # (family, file, column, every k-th row at --quick): alpha from a published file
    why_quick: str = ""         # how --quick reduces it, in words (shown in the report)

    def stored_name(self, quick):
        base = self.name or self.spec
        return base + QUICK_SUFFIX if quick else base

    def overrides(self, quick):
        """The --set overrides of this run at the chosen size."""
        sets = list(self.full)
        if self.published_grid:
            sets.append("alpha=" + ",".join(f"{v:.12g}" for v in self.grid_values(quick)))
        if quick:
            sets += list(self.quick)
        return sets

    def grid_values(self, quick):
        from seqphase.core.figures import published_columns

        family, file, column, every = self.published_grid
        values = published_columns(family, file)[column]
        values = values[values > 0]  # alpha > 0 for every model that takes a published grid
        return sorted(set(float(f"{v:.12g}") for v in (values[::every] if quick else values)))


@dataclass(frozen=True)
class Paper:
    id: str
    title: str
    authors: str
    arxiv: str
    venue: str
    docs: str                       # the docs page (relative to the repository) that discusses the paper
    runs: tuple
    notes: tuple = field(default_factory=tuple)

    @property
    def quick_cost(self):
        """The measured Cost of `seqphase reproduce ID --quick --workers 2` (sweeps/costs.toml), or None."""
        return quick_cost(self.id)

    @property
    def full_cost(self):
        """The Cost of the full reproduction: its runs' measured costs summed (`seqphase.sweeps.costs`)."""
        return full_cost(self)

    @property
    def cost_full(self):
        """The full reproduction's cost in words ("wall 263 s on 2 workers, 507 CPU-s (...)", or "not
        measured")."""
        return self.full_cost.text() if self.full_cost else "not measured"

    @property
    def cost_quick(self):
        """The `--quick` reproduction's cost in words."""
        return self.quick_cost.text() if self.quick_cost else "not measured"

    @property
    def sweeps(self):
        return [run.spec for run in self.runs]

    def run(self, spec):
        return next(r for r in self.runs if r.spec == spec or r.name == spec)

    def cite(self):
        return f"{self.authors}, \"{self.title}\", arXiv:{self.arxiv} ({self.venue})"


PAPERS = {p.id: p for p in (
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
    Paper(
        id="smi", title="Fundamental limits of learning in sequence multi-index models and deep attention "
        "networks", authors="Troiani, Cui, Dandi, Krzakala, Zdeborová", arxiv="2502.00901", venue="ICML 2025",
        docs="docs/validation/smi.md",
        runs=(
            Run("smi-2layer-se", "Fig. 1 left: Q11, Q22 and the errors versus alpha (c = 1)",
                quick=("alpha=0.2,0.4,0.6,0.8,1.0,1.2,1.4,1.6", "method.n_mc=512"),
                why_quick="8 of the 48 alphas (on the published grid), 512 Monte-Carlo draws (2048)"),
            Run("smi-2layer-se-noiseless", "Fig. 1 left, the model as written (noiseless): Q11, Q22 for eps = 1e-3 "
                "(the reference code) .. 1e-6 (c = 1)",
                quick=("alpha=1.2,1.5", "method.eps=1e-3,1e-4,1e-5", "method.n_mc=512", "method.n_error=2000"),
                why_quick="2 of the 10 alphas, eps down to 1e-5 (1e-6), 512 Monte-Carlo draws (2048), 2000 "
                          "error draws (20000)"),
            Run("smi-thresholds", "Fig. 1 right: alpha_2(c), alpha_1(c)",
                quick=("skip=1.0", "method.n_k=4096", "method.n_mc=4096"),
                why_quick="skip c = 1 only, 4096 + 4096 points (18 skips, 32768 + 16384)"),
            Run("smi-2layer-gamp", "Fig. 2 top: GAMP overlaps versus iteration",
                quick=("method.d=200", "method.n_seeds=4", "alpha=0.5,1.2", "method.max_iter=30"),
                why_quick="d = 200, 4 seeds, 2 alphas, 30 iterations (d = 1000, 16, 15, 50)"),
            Run("smi-sgd", "Fig. 2 bottom: layer-wise SGD cosines",
                quick=("method.d=100", "method.n_runs=2", "method.epochs=200", "method.log_every=20"),
                why_quick="d = 100, 2 runs, 200 epochs (d = 500, 8 runs, 1700)"),
            Run("smi-3layer-se", "Fig. 3 left: three layers",
                quick=("alpha=0.5,2.0", "method.n_mc=256", "method.max_iter=60", "method.n_error=5000"),
                why_quick="2 alphas, 256 Monte-Carlo draws, 60 iterations (48, 1024, 200)"),
            Run("smi-3layer-se-noiseless", "Fig. 3 left, the model as written (noiseless): Q11, Q22, Q33 for eps = "
                "1e-3 (the reference code) .. 1e-6, around alpha_PR = 3/2 (c = 1)",
                quick=("alpha=2.0", "method.eps=1e-3,1e-4,1e-5", "method.n_mc=256", "method.n_error=2000"),
                why_quick="1 of the 6 alphas, eps down to 1e-5 (1e-6), 256 Monte-Carlo draws (1024), 2000 error "
                          "draws (50000)"),
        )),
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
)}


def get_paper(paper_id):
    if paper_id not in PAPERS:
        raise SeqphaseError("PAPER", f"no paper with id {paper_id!r}",
                            f"use one of {', '.join(PAPERS)} (seqphase reproduce --list)")
    return PAPERS[paper_id]
