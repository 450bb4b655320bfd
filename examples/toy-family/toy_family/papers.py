"""The paper the toy family reproduces (`seqphase reproduce toy`): the linear channel's Bayes-optimal error,
a special case of the generalised linear models of arXiv:1708.03395."""

from seqphase.sweeps.papers import Paper, Run

PAPERS = (
    Paper(
        id="toy", title="Optimal errors and phase transitions in high-dimensional generalized linear models",
        authors="Barbier, Krzakala, Macris, Miolane, Zdeborová", arxiv="1708.03395", venue="PNAS 2019",
        docs="docs/howto/add-a-model.md",
        runs=(
            Run("toy-linear-se", "the linear channel's Bayes-optimal error versus alpha", quick=("alpha=0.5,1,2",),
                why_quick="3 alphas instead of 30"),
        )),
)
