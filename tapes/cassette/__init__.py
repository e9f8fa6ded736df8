"""The cassette: the frame model, the store, the framers that turn captured bytes into frames, redaction."""
