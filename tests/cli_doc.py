"""The command reference of docs/cli.md, generated from the argparse parser.

``python -m tests.cli_doc`` rewrites the section between the ``<!-- cli-reference`` markers
of docs/cli.md from ``lane_pg.cli.build_parser()``; tests/test_docs.py fails when the page
differs from what this renders (a command or option changed and the page was not
regenerated). Everything outside the markers is prose, kept as written.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "cli.md"
BEGIN = (
    "<!-- cli-reference: generated from the argparse parser by `python -m tests.cli_doc`;"
    " do not edit by hand -->"
)
END = "<!-- /cli-reference -->"
USAGE_WIDTH = "100"


@contextmanager
def _plain_environment() -> Iterator[None]:
    """No ``LANE_PG_*`` variable (some defaults read them) and a fixed usage width."""
    saved = dict(os.environ)
    try:
        for key in [k for k in os.environ if k.startswith("LANE_PG_")]:
            del os.environ[key]
        os.environ["COLUMNS"] = USAGE_WIDTH
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(action: argparse.Action) -> str:
    value = action.default
    if value is None or value is False or value == [] or value == argparse.SUPPRESS:
        return ""
    if isinstance(action, argparse._StoreTrueAction):
        return ""
    return f"`{value}`"


def _option(action: argparse.Action) -> str:
    if not action.option_strings:
        name = action.metavar or action.dest
        return f"`{name}`" + (" ..." if action.nargs in ("*", "+") else "")
    takes_value = action.nargs != 0
    metavar = action.metavar or (action.dest.upper() if takes_value else "")
    if action.choices is not None and takes_value and action.metavar is None:
        metavar = "{" + ",".join(str(c) for c in action.choices) + "}"
    flags = ", ".join(
        f"`{flag} {metavar}`" if takes_value and metavar else f"`{flag}`"
        for flag in action.option_strings
    )
    return flags


def _help(action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": ""}
    return _cell(text)


def _commands(
    parser: argparse.ArgumentParser,
) -> list[tuple[str, list[str], argparse.ArgumentParser]]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    seen: dict[int, tuple[str, list[str], argparse.ArgumentParser]] = {}
    for name, command in sub.choices.items():
        if id(command) in seen:
            seen[id(command)][1].append(name)
        else:
            seen[id(command)] = (name, [], command)
    return list(seen.values())


def render() -> str:
    """The generated section (without its markers)."""
    with _plain_environment():
        from lane_pg.cli import build_parser

        parser = build_parser()
        out: list[str] = []
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                out.append(
                    f"Global option, before the command: {_option(action)}: {_help(action)}."
                )
        out.append("")
        for name, aliases, command in _commands(parser):
            out.append(f"### {name}")
            out.append("")
            description = _cell(command.description or "")
            also = f" (also: {', '.join(f'`{a}`' for a in aliases)})" if aliases else ""
            out.append(f"{description}{also}")
            out.append("")
            out.append("```text")
            out.append(command.format_usage().strip())
            out.append("```")
            out.append("")
            rows = [a for a in command._actions if a.dest != "help"]
            if rows:
                out.append("| option | default | meaning |")
                out.append("| --- | --- | --- |")
                for action in rows:
                    out.append(f"| {_option(action)} | {_default(action)} | {_help(action)} |")
                out.append("")
        return "\n".join(out).rstrip("\n")


def section_of(text: str) -> str:
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END, start)
    return text[start:end].strip("\n")


def replace_section(text: str, section: str) -> str:
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END, start)
    return text[:start] + "\n" + section + "\n" + text[end:]


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    DOC.write_text(replace_section(text, render()), encoding="utf-8")
    print(f"rewrote the command reference of {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
