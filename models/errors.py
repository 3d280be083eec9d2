"""The two exceptions every layer of the app shares (no imports: anything may import this)."""


class InputError(ValueError):
    """Bad input from the user: the message is one clear line meant to be shown as-is."""


class Cancelled(Exception):
    """Raised at a stage boundary when the caller's ``should_stop()`` says the work is stale."""
