"""The test suite: unit/ (sans-IO, seconds), e2e/ (real peers and processes), support/ (shared helpers)."""
