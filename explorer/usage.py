"""The window's command-line error (no imports: the app and the session reader both raise it)."""


class UsageError(Exception):
    """A bad command-line value: printed as one line, exit status 2."""
