"""Records of the in-process lane scheduler that outlive a manager: an accepted command as a
storage keeps it, and a dead letter. Value types, so every storage (files in
``lane_pg.scheduler``, tables in ``lane_pg.postgres``) shares them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from lane_pg.types.base import JSON


@dataclass(frozen=True, slots=True)
class StoredCommand:
    """A persisted command: enough to rebuild it through a command factory (LREL-6)."""

    command_id: str
    lane_id: str
    command_type: str
    payload: JSON
    submitted_at: datetime

    def to_json(self) -> dict[str, JSON]:
        return {
            "command_id": self.command_id,
            "lane_id": self.lane_id,
            "command_type": self.command_type,
            "payload": self.payload,
            "submitted_at": self.submitted_at.isoformat(),
        }

    @classmethod
    def from_json(cls, doc: dict[str, JSON]) -> StoredCommand:
        return cls(
            command_id=str(doc["command_id"]),
            lane_id=str(doc["lane_id"]),
            command_type=str(doc["command_type"]),
            payload=doc.get("payload"),
            submitted_at=datetime.fromisoformat(str(doc["submitted_at"])),
        )


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A terminally failed command (LREL-1). ``payload`` is set for persistable commands."""

    lane_id: str
    command_id: str
    command_type: str
    error: str
    attempts: int
    failed_at: datetime
    payload: JSON = None

    def to_json(self) -> dict[str, JSON]:
        return {
            "lane_id": self.lane_id,
            "command_id": self.command_id,
            "command_type": self.command_type,
            "error": self.error,
            "attempts": self.attempts,
            "failed_at": self.failed_at.isoformat(),
            "payload": self.payload,
        }

    @classmethod
    def from_json(cls, doc: dict[str, JSON]) -> DeadLetter:
        return cls(
            lane_id=str(doc["lane_id"]),
            command_id=str(doc["command_id"]),
            command_type=str(doc["command_type"]),
            error=str(doc["error"]),
            attempts=int(doc["attempts"]),
            failed_at=datetime.fromisoformat(str(doc["failed_at"])),
            payload=doc.get("payload"),
        )


__all__ = ["DeadLetter", "StoredCommand"]
