"""The one generic path from a declared operation to its stored function.

An entity's PostgreSQL implementation (``PostgresLogs``, ...) names, for each operation that
is one ``SELECT`` of a ``lane.*`` function, only what PostgreSQL adds to the declaration:

    add_job_log = statement(
        "SELECT lane.add_job_log($1, $2, $3, $4, $5, $6::uuid)",
        result=value,
        token=optional_token_text,
    )

``$n`` is the n-th parameter of the declaration (``lane_pg.backend.logs.Logs.add_job_log``),
a keyword names the conversion of one parameter, and ``result`` turns the rows into the
declared result. ``Entity.__init_subclass__`` compiles each such statement into a method
that reads the call's arguments object in declared order (as ``dataclasses`` writes
``__init__``), so a call costs what a hand-written method costs and the parameters are
written once, in the declaration.
An operation with more logic than that (the hot paths, several statements) is an ordinary
method of the entity class.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import asyncpg

from lane_pg.backend.operation import Handle, Operation
from lane_pg.errors import JobNotFound
from lane_pg.postgres.database import Database
from lane_pg.postgres.rows import JOB_COLUMNS, job_from_row
from lane_pg.types import JobRow

Rows = Sequence[asyncpg.Record]


class Statement:
    """An operation that is one statement: its text, its conversions and its result."""

    def __init__(
        self,
        text: str,
        result: Callable[[Rows], Any],
        conversions: dict[str, Callable[[Any], Any]],
    ) -> None:
        self.text = text
        self.result = result
        self.conversions = conversions


def statement(
    text: str, *, result: Callable[[Rows], Any], **conversions: Callable[[Any], Any]
) -> Any:
    """Declare an operation as the one statement ``text`` (see the module docstring)."""
    return Statement(text, result, conversions)


def job_statement(call: str, **conversions: Callable[[Any], Any]) -> Any:
    """An operation whose function returns one job row (``lane.promote_job($1, $2, $3)``):
    the row as ``JobRow``, ``JobNotFound`` when the function returns none."""
    return Statement(f"SELECT {JOB_COLUMNS} FROM {call} AS j", one_job, conversions)


def one_job(rows: Rows) -> JobRow:
    if not rows or rows[0]["id"] is None:
        raise JobNotFound("job not found")
    return job_from_row(rows[0])


def job_list(rows: Rows) -> list[JobRow]:
    """Every row as ``JobRow`` (``SELECT {JOB_COLUMNS} FROM lane.clean_jobs(...) AS j``)."""
    return [job_from_row(row) for row in rows]


def value(rows: Rows) -> Any:
    """The first column of the only row (``SELECT lane.remove_job(...)``)."""
    return rows[0][0]


def nothing(rows: Rows) -> None:
    return None


class Entity:
    """Base of an entity's PostgreSQL implementation: the operations of the handle it
    ``serves``, over one ``Database``."""

    serves: ClassVar[type[Handle]]

    def __init__(self, db: Database) -> None:
        self._db = db

    def __init_subclass__(cls, *, serves: type[Handle] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if serves is not None:
            cls.serves = serves
        for name, attribute in list(vars(cls).items()):
            if isinstance(attribute, Statement):
                op = cls.serves.operations.get(name)
                if op is None:
                    raise TypeError(f"{cls.__name__}.{name}: not an operation of {cls.serves.name}")
                setattr(cls, name, _compile(op, attribute))


def _compile(op: Operation, spec: Statement) -> Callable[..., Any]:
    """An implementation that sends ``spec`` with the call's arguments, in declared order."""
    name, signature = op.name, op.signature
    unknown = set(spec.conversions) - set(signature.parameters)
    if unknown:
        raise TypeError(f"{name}: conversions of undeclared parameters {sorted(unknown)}")
    referenced = {int(number) for number in re.findall(r"\$(\d+)", spec.text)}
    if referenced != set(range(1, len(signature.parameters) + 1)):
        raise TypeError(f"{name}: the statement must use $1..${len(signature.parameters)}")
    namespace: dict[str, Any] = {"_text": spec.text, "_result": spec.result}
    arguments = []
    for position, parameter in enumerate(signature.parameters.values()):
        if parameter.name in spec.conversions:
            namespace[f"_convert{position}"] = spec.conversions[parameter.name]
            arguments.append(f"_convert{position}(args.{parameter.name})")
        else:
            arguments.append(f"args.{parameter.name}")
    source = (
        f"async def {name}(self, args):\n"
        f"    return _result(await self._db.fetch(_text, {', '.join(arguments)}))\n"
    )
    exec(source, namespace)
    function: Callable[..., Any] = namespace[name]
    function.__doc__ = f"``{spec.text}``"
    function.__annotations__ = {"args": op.arguments, "return": op.result}
    return function
