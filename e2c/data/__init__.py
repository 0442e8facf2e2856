"""Data: the benchmark registry, verl parquet builders (SFT / RL / EF-SFT) and synthetic E2C tasks."""
