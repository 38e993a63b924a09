"""Errors a user can fix: the CLI prints them as one line and exits with code 2, no traceback."""


class TuneloopError(Exception):
    """A mistake in the user's input (options, files, folders). Message: what, where, how to fix."""


class ConfigError(TuneloopError):
    """An invalid option or configuration value."""


class DataError(TuneloopError):
    """A data file that cannot be used as given."""
