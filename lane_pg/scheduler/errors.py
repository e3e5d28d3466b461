"""The errors of the in-process lane scheduler, all of them ``LaneError``s."""

from __future__ import annotations

from lane_pg.errors import LaneError, describe_exception


class InvalidLaneConfig(LaneError, ValueError):
    """A lane, lane configuration or scheduler option that cannot be honoured (LANE-8)."""


class UnknownLane(LaneError, LookupError):
    """``submit`` named a lane the manager does not have (LANE-2, LANE-8)."""

    def __init__(self, lane_id: str) -> None:
        super().__init__(f"unknown lane {lane_id!r}")
        self.lane_id = lane_id


class UnknownCommandType(LaneError, LookupError):
    """A persisted command whose type has no registered command factory (LREL-6)."""


class ShutdownInProgress(LaneError):
    """The manager was shut down (LREL-7) or stopped: it accepts no new commands."""


class DrainTimeout(LaneError, TimeoutError):
    """``drain(timeout)`` ran out of time with commands still outstanding (LREL-8)."""

    def __init__(self, outstanding: int, timeout: float) -> None:
        super().__init__(f"{outstanding} command(s) still outstanding after {timeout:g}s")
        self.outstanding = outstanding
        self.timeout = timeout


class EventStreamClosed(LaneError):
    """``recv()`` on an event stream that was closed and has nothing left to read."""


class CommandFailed(LaneError):
    """A command failed terminally (LANE-4): its retries, if any, are spent.

    ``cause`` (also ``__cause__``) is the exception of the last attempt.
    """

    def __init__(
        self,
        *,
        lane_id: str,
        command_id: str,
        command_type: str,
        attempts: int,
        cause: BaseException,
    ) -> None:
        super().__init__(
            f"command {command_id} ({command_type}) on lane {lane_id!r} failed after"
            f" {attempts} attempt(s): {describe_error(cause)}"
        )
        self.lane_id = lane_id
        self.command_id = command_id
        self.command_type = command_type
        self.attempts = attempts
        self.cause = cause
        self.__cause__ = cause


class LaneTimeout(CommandFailed, TimeoutError):
    """A command whose last attempt ran longer than its lane's timeout (LCFG-1).

    ``cause`` is a ``TimeoutError`` describing the attempt that timed out.
    """


def describe_error(exc: BaseException) -> str:
    """``"ValueError: bad input"``: the text events and dead letters carry."""
    return describe_exception(exc)
