"""Dead letters, the lane storage protocol and the file-based ``LocalStorage`` (LREL)."""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import os
import re
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from lane_pg.scheduler.errors import InvalidLaneConfig
from lane_pg.types import JSON, dumps_json
from lane_pg.types.scheduler import DeadLetter as DeadLetter
from lane_pg.types.scheduler import StoredCommand as StoredCommand

logger = logging.getLogger("lane_pg.scheduler")
T = TypeVar("T")

_SAFE_ID = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,199}")


class DeadLetterQueue:
    """An in-memory, bounded list of dead letters; when full the oldest is evicted (A15)."""

    def __init__(self, max_size: int = 1000) -> None:
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise InvalidLaneConfig(f"DLQ max_size must be a positive integer: {max_size!r}")
        self._letters: deque[DeadLetter] = deque(maxlen=max_size)

    @property
    def max_size(self) -> int:
        return self._letters.maxlen or 0

    def __len__(self) -> int:
        return len(self._letters)

    async def push(self, letter: DeadLetter) -> DeadLetter | None:
        """Add ``letter``; returns the letter evicted to make room, if any."""
        evicted = self._letters[0] if len(self._letters) == self.max_size else None
        self._letters.append(letter)
        return evicted

    async def list(self) -> builtins.list[DeadLetter]:
        """The letters, oldest first."""
        return builtins.list(self._letters)

    async def get(self, command_id: str) -> DeadLetter | None:
        return next((x for x in self._letters if x.command_id == command_id), None)

    async def clear(self) -> int:
        count = len(self._letters)
        self._letters.clear()
        return count


class LaneStorage(Protocol):
    """Where a manager keeps accepted commands and dead letters across restarts (LREL-3).

    The manager calls ``save_command`` when it accepts a persistable command,
    ``remove_command`` when the command settles (success or terminal failure), and
    ``save_dead_letter`` for every terminal failure. ``load_commands`` feeds recovery.
    """

    async def save_command(self, command: StoredCommand) -> None: ...

    async def load_commands(self) -> list[StoredCommand]: ...

    async def remove_command(self, command_id: str) -> None: ...

    async def save_dead_letter(self, letter: DeadLetter) -> None: ...

    async def load_dead_letters(self) -> list[DeadLetter]: ...

    async def clear_all(self) -> None: ...


class LocalStorage:
    """``LaneStorage`` as JSON files under a directory, created if missing (LREL-4).

    ``commands/<command_id>.json`` holds one command; ``dead_letters/<ns>-<n>-<id>.json``
    one letter (named so that the name order is the failure order). Writes go to a
    temporary file renamed into place, so a crash never leaves half a document. File I/O
    runs in a worker thread.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._root = Path(path)
        self._commands = self._root / "commands"
        self._letters = self._root / "dead_letters"
        self._commands.mkdir(parents=True, exist_ok=True)
        self._letters.mkdir(parents=True, exist_ok=True)
        self._sequence = 0

    @property
    def path(self) -> Path:
        return self._root

    async def save_command(self, command: StoredCommand) -> None:
        text = dumps_json(command.to_json(), "command")
        await asyncio.to_thread(
            _write_atomic, self._commands / _file_name(command.command_id), text
        )

    async def load_commands(self) -> list[StoredCommand]:
        docs = await asyncio.to_thread(_read_dir, self._commands)
        commands = _parse(docs, StoredCommand.from_json)
        commands.sort(key=lambda c: (c.submitted_at, c.command_id))
        return commands

    async def remove_command(self, command_id: str) -> None:
        path = self._commands / _file_name(command_id)
        await asyncio.to_thread(path.unlink, missing_ok=True)

    async def save_dead_letter(self, letter: DeadLetter) -> None:
        self._sequence += 1
        name = f"{time.time_ns():020d}-{self._sequence:09d}-{_file_name(letter.command_id)}"
        text = dumps_json(letter.to_json(), "dead letter")
        await asyncio.to_thread(_write_atomic, self._letters / name, text)

    async def load_dead_letters(self) -> list[DeadLetter]:
        docs = await asyncio.to_thread(_read_dir, self._letters)
        return _parse(docs, DeadLetter.from_json)

    async def clear_all(self) -> None:
        await asyncio.to_thread(_clear, (self._commands, self._letters))


def _file_name(command_id: str) -> str:
    if not _SAFE_ID.fullmatch(command_id):
        raise InvalidLaneConfig(f"command id {command_id!r} cannot be stored as a file name")
    return f"{command_id}.json"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _read_dir(directory: Path) -> list[dict[str, JSON]]:
    docs: list[dict[str, JSON]] = []
    for path in sorted(directory.glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            logger.warning("lane storage: skipping unreadable file %s: %s", path, exc)
            continue
        if isinstance(doc, dict):
            docs.append(doc)
        else:
            logger.warning("lane storage: skipping %s: not a JSON object", path)
    return docs


def _parse(docs: list[dict[str, JSON]], parse: Callable[[dict[str, JSON]], T]) -> list[T]:
    parsed: list[T] = []
    for doc in docs:
        try:
            parsed.append(parse(doc))
        except (KeyError, TypeError, ValueError) as exc:
            logger.warning("lane storage: skipping malformed document %r: %s", doc, exc)
    return parsed


def _clear(directories: tuple[Path, ...]) -> None:
    for directory in directories:
        for path in directory.iterdir():
            if path.suffix in {".json", ".tmp"}:
                path.unlink(missing_ok=True)
