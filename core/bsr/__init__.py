"""Bilinear sequence regression, BSR (spec rie_bsr_quadratic.md, part A): an input is a sequence of L tokens of
dimension d, X (d x L, i.i.d. N(0, 1)); the target is a rank-r matrix S* = U* V*^T / sqrt(r) (U* d x r, V* L x r,
i.i.d. N(0, 1)); labels y = <X, S*> / sqrt(dL) + sqrt(delta) z; n = alpha d L samples, rho = r/d, beta = L/d.

Files: the output channel (channels.py: the linear measurement of S plus Gaussian label noise on the protocol of
`core/channel.py`, the parameter checks, the SE's channel step), the Bayes-optimal state evolution (se.py: the
scalar equation (A.1) as a parametric curve in the effective denoising noise zeta, the beta = inf closed form,
the low-rank limit), closed-form baselines (baselines.py: ridge, the minimal nuclear-norm threshold), the
perfect-recovery threshold two ways (thresholds.py), the model and its methods (model.py) and the paper's
figures (figures.py). The prior step is the rectangular RIE of the shared module `seqphase.core.rectangular_rie`
(its denoising MMSE of S* + sqrt(zeta) Z).
"""

from seqphase.core.family import Family

#: the family as seqphase registers it (pyproject.toml, entry-point group "seqphase.models"): its models; its
#: sweep specs (sweeps/), published data (reference/), papers (papers.py) and agreement checks (checks.py)
#: are where every family keeps them
FAMILY = Family(package=__name__, models={"bsr": "seqphase.core.bsr.model:BSRModel"})
