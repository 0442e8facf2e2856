"""The E2C paper's claims at laptop scale: ``bash scripts/claims.sh`` (:mod:`e2c.claims.cli`)."""
