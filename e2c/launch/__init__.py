"""What the SFT and RL launchers share: checks of their data files, batch shapes, presets,
tracking, checkpoints, LoRA, the forked driver, the cluster, devices and weights (docs/training.md)."""
