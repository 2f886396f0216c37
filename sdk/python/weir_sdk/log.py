"""Logging through the host: messages appear in `weir`'s log tagged with
the operator's id and instance.

`weir_sdk.log.info("...")` (and `trace`, `debug`, `warn`, `error`) or the
standard `logging` module: records of the logger `weir` and its children
(`logging.getLogger("weir.my-op")`) go to the host at their level.
"""

import logging

LEVELS = ("trace", "debug", "info", "warn", "error")


def _send(level, message):
    from .runtime import _active

    if _active:
        _active[-1].host.log(level, str(message))


def trace(message):
    """Logs `message` at level trace."""
    _send("trace", message)


def debug(message):
    """Logs `message` at level debug."""
    _send("debug", message)


def info(message):
    """Logs `message` at level info."""
    _send("info", message)


def warn(message):
    """Logs `message` at level warn."""
    _send("warn", message)


def error(message):
    """Logs `message` at level error."""
    _send("error", message)


class HostHandler(logging.Handler):
    """A `logging` handler that sends records to the host."""

    def emit(self, record):
        if record.levelno >= logging.ERROR:
            level = "error"
        elif record.levelno >= logging.WARNING:
            level = "warn"
        elif record.levelno >= logging.INFO:
            level = "info"
        elif record.levelno >= logging.DEBUG:
            level = "debug"
        else:
            level = "trace"
        _send(level, self.format(record))


#: The logger `weir`: its records and its children's go to the host.
logger = logging.getLogger("weir")
if not any(isinstance(h, HostHandler) for h in logger.handlers):
    logger.addHandler(HostHandler())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
