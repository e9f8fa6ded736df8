"""The suite's one pytest plugin; fixtures live in the conftest.py of the tests that use them
(e2e/, e2e/http/) and helpers in tests/support."""

pytest_plugins = ["pytester"]  # tests of our pytest plugin run inner pytest sessions
