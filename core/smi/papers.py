"""The papers of the smi family that `seqphase reproduce` covers (smi): each `Paper` names the shipped
sweeps that reproduce it, the figure each reproduces and its reduced `--quick` grid (`seqphase.sweeps.papers`).
Its agreement checks are in checks.py."""

from seqphase.sweeps.papers import Paper, Run

PAPERS = (
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
)
