"""Errors a user can cause. Their message is one sentence that says what and where; the CLI
prints it without a traceback and exits non-zero."""

ERROR_PREFIX = "tapes: error: "  # what the CLI puts before the sentence on stderr


class UserError(Exception):
    """A mistake in what the user gave us: a bad cassette, a missing file, a bad flag."""
