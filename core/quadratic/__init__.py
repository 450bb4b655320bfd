"""Extensive-width two-layer network with quadratic activation (spec rie_bsr_quadratic.md, part B): teacher
weights W* (m x d, m = kappa d, i.i.d. N(0, 1)), labels y = Tr[(x x^T - I) S*]/d + sqrt(delta) z with
S* = W*^T W* / sqrt(m), n = alpha d^2 samples.

Files: the output channel (channels.py: the linear measurement of S plus Gaussian label noise, the protocol of
`core/channel.py`), the Bayes-optimal state evolution (se.py: the closed-form scalar equation of part B2 as a
parametric curve, its plain fixed-point iteration, the small-width limit), the perfect-recovery threshold two
ways (thresholds.py), the model and its methods (model.py) and the paper's figures (figures.py). The prior
step is the symmetric RIE of the shared module `seqphase.core.rie` (scale = 1, rho = kappa: S' units).
"""

from seqphase.core.family import Family

#: the family as seqphase registers it (pyproject.toml, entry-point group "seqphase.models"): its models; its
#: sweep specs (sweeps/), published data (reference/), papers (papers.py) and agreement checks (checks.py)
#: are where every family keeps them
FAMILY = Family(package=__name__, models={"quadratic": "seqphase.core.quadratic.model:QuadraticModel",
                                          "quadratic-erm": "seqphase.core.quadratic.model:QuadraticERMModel"})
