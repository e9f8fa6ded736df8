"""Analysis of recorded sessions: normalisation, diff, lint, verify."""
