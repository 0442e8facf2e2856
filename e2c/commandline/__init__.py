"""The command line: value types, settings dataclasses and their flags, the parser with its aliases,
the guard every entry point runs under, and the ``e2c`` command (docs/extending.md)."""
