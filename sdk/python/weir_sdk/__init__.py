"""`weir_sdk`: write Weir stream operators in Python.

An operator is a subclass of `Operator` with default hooks; state lives in
the host through `MapState` and `ValueState` (cached in the guest, the Rust
SDK's layout and encoding); `Context` emits records and registers timers;
errors are the exceptions of `weir_sdk.errors`. `export(MyOperator,
globals())` in `app.py` makes it the component's operator (built with
componentize-py, world `operator-rows`); `weir_sdk.testing.Harness` runs
it in plain CPython for tests. See docs/guide-python.md.
"""

from . import log, row
from .component import export
from .config import parse as parse_config
from .context import Batch, Context, OpenContext, Timers
from .errors import Error, IncompatibleState, InvalidConfig, InvalidInput, OperatorError
from .jsontext import fmt_f64, json_str, json_text
from .operator import Operator
from .record import Change, Record, TimeDomain, Timer
from .state import Json, MapState, Row, ValueState
from .text import trim

#: The SDK's version.
__version__ = "0.1.0"

#: The largest event time, which the watermark becomes at the end of input.
END_OF_TIME = 2**63 - 1

__all__ = [
    "Batch",
    "Change",
    "Context",
    "END_OF_TIME",
    "Error",
    "IncompatibleState",
    "InvalidConfig",
    "InvalidInput",
    "Json",
    "MapState",
    "OpenContext",
    "Operator",
    "OperatorError",
    "Record",
    "Row",
    "TimeDomain",
    "Timer",
    "Timers",
    "ValueState",
    "export",
    "fmt_f64",
    "json_str",
    "json_text",
    "log",
    "parse_config",
    "row",
    "trim",
]
