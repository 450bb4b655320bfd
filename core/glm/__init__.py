"""The generalised linear model family: separable priors (priors.py), the scalar channels of
core/channel.py (channels.py), scalar SE (se.py), GAMP (gamp.py), thresholds (thresholds.py), the
model and its methods (model.py) and figures (figures.py)."""
