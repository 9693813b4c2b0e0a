"""Results stage: the result record (the JSON schema), the comparison across modes with its
intervals, and the table, JSON, CSV, plot and TensorBoard logs made from it."""
