"""The one error type the CLI turns into a one-line message (and exit status 2), and the one way a
message quotes a name taken from the user's input."""


class EsbperfError(Exception):
    """Bad input or an environment problem, with a message that says what to do."""


def quoted(name: object) -> str:
    """A name from the input (a field, a host's role, a key) as a message quotes it: 'users', and
    'a\\nb' for one holding a line break or another control character (repr's escapes), so that
    a bad-input message stays one line whatever the name."""
    return repr(str(name))
