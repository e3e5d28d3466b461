"""Run the ```python blocks of one markdown page in order, as one session.

    python tests/docs_runner.py PAGE WORKDIR

tests/test_docs.py starts this in a subprocess per page (so a page's registrations, ``Q``
wiring and environment never leak into the test process), with ``LANE_PG_DSN`` set to a
fresh migrated database and WORKDIR as the current directory. Blocks share one namespace,
like a reader typing them into ``python -m asyncio``: a block with top-level ``await`` runs
on the session's event loop, any other block is executed as is. A block whose first line
is ``# file: PATH`` is a module of the reader's project: it is written to WORKDIR/PATH and
imported. Exit 0 when every block ran.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import sys
from pathlib import Path

# Python put this file's directory first on the path, where tests/redis would be found as
# the `redis` package of a page that uses the Redis client: the repository root instead.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from tests.docs_blocks import Block, python_blocks  # noqa: E402 - after the path fix


def _module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def _run_block(
    block: Block, namespace: dict[str, object], loop: asyncio.AbstractEventLoop, workdir: Path
) -> None:
    if block.file is not None:
        target = workdir / block.file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.source, encoding="utf-8")
        importlib.invalidate_caches()
        importlib.import_module(_module_name(block.file))
        return
    code = compile(
        block.source, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )
    if code.co_flags & inspect.CO_COROUTINE:
        loop.run_until_complete(eval(code, namespace))
    else:
        exec(code, namespace)


async def _close(namespace: dict[str, object]) -> None:
    backend = namespace.get("backend")
    close = getattr(backend, "close", None)
    if close is not None:
        result = close()
        if inspect.isawaitable(result):
            await result


def main(page: str, workdir: str) -> int:
    root = Path(workdir)
    sys.path.insert(0, str(root))
    namespace: dict[str, object] = {"__name__": "__main__"}
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        for block in python_blocks(Path(page)):
            if block.exempt is not None:
                continue
            print(f"--- running {block.where}", flush=True)
            _run_block(block, namespace, loop, root)
        loop.run_until_complete(_close(namespace))
    finally:
        asyncio.set_event_loop(None)
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
