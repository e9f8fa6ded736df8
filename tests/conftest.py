"""The suite's one pytest plugin, and the signals its commands start heeding; fixtures live in the
conftest.py of the tests that use them (e2e/, e2e/http/) and helpers in tests/support."""

import signal

import pytest

pytest_plugins = ["pytester"]  # tests of our pytest plugin run inner pytest sessions


def pytest_configure(config: pytest.Config) -> None:
    """The suite stops the commands it starts with SIGINT and SIGHUP, as Ctrl-C and a terminal
    closing do. Run as a script's background job (SIGINT ignored) or under nohup (SIGHUP ignored),
    it would pass on ignoring them to its commands: they start with the defaults instead."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
