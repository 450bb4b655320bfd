"""A toy model family for seqphase, packaged on its own: the Bayes-optimal state evolution of the linear
channel y = F x + sqrt(delta) z with the prior x ~ N(0, I_d) (F: n x d, entries N(0, 1/d), n = alpha d).

It registers itself under the entry-point group "seqphase.models" (pyproject.toml: toy = "toy_family:FAMILY")
with everything a family carries: its model (model.py), its sweep specs (sweeps/), its published data
(reference/), its paper (papers.py) and that paper's agreement checks (checks.py). Its figures are seqphase's
generic ones.
"""

from seqphase.core.family import Family

# sweeps/, reference/, papers.py (PAPERS) and checks.py (CHECKS) of this package are where a Family looks by default
FAMILY = Family(package=__name__, models={"toy-linear": "toy_family.model:LinearModel"})
