"""The ground floor: errors, environment switches, paths, files, progress, run folders and identity,
statistics, results files and model names. Imports nothing of e2c above it (docs/extending.md)."""
