"""Sequence multi-index models / deep tied attention (spec: shared/spec/smi.md)."""
