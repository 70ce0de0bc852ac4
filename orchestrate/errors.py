"""Errors a user can fix: the CLI prints the message as one line and exits non-zero."""


class UserError(Exception):
    """A problem with the user's input or environment; the message names the fix."""

    exit_code = 2


class BuildFailed(Exception):
    """One or more packages failed to build (already reported in the summary)."""

    exit_code = 1
