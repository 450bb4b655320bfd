"""Sequence multi-index models / deep tied attention (Troiani et al., arXiv:2502.00901; docs/explanation/smi.md)."""
