"""Synthetic E2C tasks whose executions are narrated traces of real program runs (see ``generate``)."""
