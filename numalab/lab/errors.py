"""The lab's error, apart from LabHost so that every lab module can raise it without importing the others."""


class LabError(RuntimeError):
    """The lab cannot be brought up or inspected; the message says what to do next."""
