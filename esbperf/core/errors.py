"""The one error type the CLI turns into a one-line message (and exit status 2)."""


class EsbperfError(Exception):
    """Bad input or an environment problem, with a message that says what to do."""
