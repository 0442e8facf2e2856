"""Generation of E2C chains. ``hf`` is the transformers (CPU) path."""
