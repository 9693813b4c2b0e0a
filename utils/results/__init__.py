"""Results stage: the result record (the JSON schema), the comparison across modes, and the
table, JSON, CSV and plot made from it."""
