"""Attention-indexed models (AIM, spec aim.md): one attention layer with tied key/query S = W W^T / sqrt(r d),
r = rho d, observed through y = g(h) of the T x T attention index h_ab = (x_a^T S x_b - delta_ab Tr S)/sqrt(d);
alpha = n/d^2.

Files: the output channels on the folded index (channels.py: softmax, linear, hardmax T = 2), the
Bayes-optimal state evolution (se.py: the closed-form parametric curve of softmax and linear, the hardmax
fixed point with k-space panel quadrature, the general channel-step SE, the small-width limits), the
thresholds (thresholds.py), the model and its methods (model.py) and the paper's figures (figures.py). The
prior step is the symmetric RIE of the shared module `seqphase.core.rie`.
"""

from seqphase.core.family import Family

#: the family as seqphase registers it (pyproject.toml, entry-point group "seqphase.models"): its models; its
#: sweep specs (sweeps/), published data (reference/), papers (papers.py) and agreement checks (checks.py)
#: are where every family keeps them
FAMILY = Family(package=__name__, models={"aim": "seqphase.core.aim.model:AIMModel"})
