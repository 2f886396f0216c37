"""Errors an operator raises, one class per variant of the WIT `error`
(wit/types.wit).

Raise them from any hook: the SDK returns the matching variant to the host,
which fails the job's current attempt and shows the message with the
operator's id, so say what is wrong and how to fix it. Any other exception
is a bug in the operator: it traps the call, and `weir run` shows the
exception's own text.
"""


class Error(Exception):
    """Base of the errors the SDK maps to WIT `error` variants. Raise a
    subclass; `Error` itself maps to `other`."""

    #: The name of the WIT variant, as `weir` prints it.
    kind = "other"

    def __init__(self, message):
        super().__init__(message)
        self.message = str(message)

    def __str__(self):
        return self.message


class InvalidConfig(Error):
    """The operator's `config` is invalid: name the field (`invalid-config`)."""

    kind = "invalid-config"


class InvalidInput(Error):
    """A record cannot be processed: malformed payload, missing field
    (`invalid-input`)."""

    kind = "invalid-input"


class IncompatibleState(Error):
    """Snapshot bytes or stored state cannot be read or migrated
    (`incompatible-state`)."""

    kind = "incompatible-state"


class OperatorError(Error):
    """Anything else that is not a bug (`other`)."""

    kind = "other"
