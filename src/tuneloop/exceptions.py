"""Errors a user can fix: the CLI prints them as one line and exits with code 2 (130/143 for a signal), no
traceback."""


class TuneloopError(Exception):
    """A mistake in the user's input (options, files, folders). Message: what, where, how to fix."""


class ConfigError(TuneloopError):
    """An invalid option or configuration value."""


class DataError(TuneloopError):
    """A data file that cannot be used as given."""


class Interrupted(TuneloopError):
    """SIGINT/SIGTERM: a checkpoint was saved at a step boundary and the run stopped."""

    def __init__(self, message: str, signal_number: int):
        super().__init__(message)
        self.signal_number = signal_number


class NonFiniteLoss(TuneloopError):
    """The training loss became NaN or infinite."""

    def __init__(self, step: int, value: float):
        super().__init__(f"the training loss became {value} by step {step}; stopped (checkpoints already saved are "
                         "intact). Lower --lr, or pass --skip-nonfinite-batches to skip such batches")
        self.step, self.value = step, value
