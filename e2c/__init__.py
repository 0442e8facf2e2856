"""E2C: Explore-Execute Chain reasoning. The pipeline lives in data, sft, rl, eval and tts."""
