"""Evaluation: scoring, metrics and result files."""
