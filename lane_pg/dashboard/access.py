"""Who may see the dashboard and what each viewer may change.

The access hook takes the request and returns a ``Grant`` (the viewer's name and the
actions allowed), or None to refuse the request (401 with a basic-auth challenge). The
default hook reads basic-auth credentials from the environment:

* ``LANE_PG_DASHBOARD_AUTH=user:password``: that user may do everything;
* ``LANE_PG_DASHBOARD_READONLY_AUTH=user:password``: that user may look, not act.

With neither set, every request is allowed every action: the dashboard then binds
127.0.0.1 by default, so only this machine reaches it. A read-only viewer sees no action
buttons, and a forged POST is answered 403 and changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from starlette.requests import HTTPConnection

ACTIONS: frozenset[str] = frozenset(
    {
        "pause",  # pause and resume a queue
        "limits",  # set or clear a queue's rate limit and max-active bound
        "retry",  # retry one failed job, or every failed job matching a filter
        "remove",  # remove one job, or every failed job matching a filter
        "promote",  # run a delayed job now
        "cancel_batch",
        "remove_repeat",
    }
)
"""Every action the dashboard can take; a ``Grant`` allows a subset of them."""


@dataclass(frozen=True, slots=True)
class Grant:
    """What one viewer may do: ``actions`` (a subset of ``ACTIONS``); ``user`` names the
    viewer in the events its actions record (None: anonymous)."""

    actions: frozenset[str]
    user: str | None = None

    def allows(self, action: str) -> bool:
        return action in self.actions

    @property
    def read_only(self) -> bool:
        return not self.actions


def full_access(user: str | None = None) -> Grant:
    return Grant(ACTIONS, user)


def read_only(user: str | None = None) -> Grant:
    return Grant(frozenset(), user)


AccessHook = Callable[[HTTPConnection], "Grant | Awaitable[Grant | None] | None"]
"""Decides each request: a ``Grant``, or None to refuse it (401)."""

SyncAccessHook = Callable[[HTTPConnection], "Grant | None"]

AUTH_ENV = "LANE_PG_DASHBOARD_AUTH"
READONLY_AUTH_ENV = "LANE_PG_DASHBOARD_READONLY_AUTH"


def _credentials(text: str, variable: str) -> tuple[str, str]:
    user, colon, password = text.partition(":")
    if not colon or not user or not password:
        raise ValueError(f"{variable} must be user:password, with both parts non-empty")
    return user, password


def basic_auth_user(connection: HTTPConnection) -> tuple[str, str] | None:
    """The user and password of the request's ``Authorization: Basic`` header."""
    header = connection.headers.get("authorization", "")
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon else None


def environment_access(environ: Mapping[str, str] | None = None) -> SyncAccessHook:
    """The default access hook, from ``LANE_PG_DASHBOARD_AUTH`` and
    ``LANE_PG_DASHBOARD_READONLY_AUTH`` (read once, now: a bad value fails at start)."""
    env = os.environ if environ is None else environ
    users: dict[str, tuple[str, Grant]] = {}
    if env.get(AUTH_ENV):
        user, password = _credentials(env[AUTH_ENV], AUTH_ENV)
        users[user] = (password, full_access(user))
    if env.get(READONLY_AUTH_ENV):
        user, password = _credentials(env[READONLY_AUTH_ENV], READONLY_AUTH_ENV)
        if user in users:
            raise ValueError(f"{AUTH_ENV} and {READONLY_AUTH_ENV} name the same user {user!r}")
        users[user] = (password, read_only(user))
    if not users:
        return lambda connection: full_access()

    def decide(connection: HTTPConnection) -> Grant | None:
        given = basic_auth_user(connection)
        if given is None or given[0] not in users:
            return None
        password, grant = users[given[0]]
        # Constant-time: the comparison's time says nothing about the password.
        if not hmac.compare_digest(given[1].encode(), password.encode()):
            return None
        return grant

    return decide


def read_only_access(hook: SyncAccessHook) -> SyncAccessHook:
    """``hook`` with every grant cut to read-only (``dashboard --read-only``)."""

    def decide(connection: HTTPConnection) -> Grant | None:
        grant = hook(connection)
        return None if grant is None else read_only(grant.user)

    return decide
