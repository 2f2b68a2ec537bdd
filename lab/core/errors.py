"""The one exception type a user should ever see: a sentence that says what went wrong and what to do."""


class LabError(Exception):
    """An error the user can fix. Its message is one or two plain sentences, never a deep traceback."""


class CompileError(LabError):
    """A kernel failed to compile; the message shows the compiler's complaint next to the source lines."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log
