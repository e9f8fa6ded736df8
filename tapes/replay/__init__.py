"""Replay: the engine, the causality index, matching, sessions, streams, faults, new episodes."""
