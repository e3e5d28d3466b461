"""Old import paths of modules that moved to their layer's home, kept working.

Code written against an earlier layout (``from lane_pg.flows import FlowJob``) imports the
module at its new place, with a ``DeprecationWarning`` naming it; local store snapshots
that name a record class by its old module open the same way. One table, one finder.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from importlib.machinery import ModuleSpec
from types import ModuleType

MOVED: dict[str, str] = {
    "lane_pg.app": "lane_pg.facade.app",
    "lane_pg.failed": "lane_pg.backend.failed",
    "lane_pg.flows": "lane_pg.types.flows",
    "lane_pg.idempotency": "lane_pg.postgres.idempotency",
    "lane_pg.lanes": "lane_pg.scheduler",
    "lane_pg.logs": "lane_pg.worker.logs",
    "lane_pg.metrics": "lane_pg.types.metrics",
    "lane_pg.schedule": "lane_pg.types.schedule",
    "lane_pg.facade.driver": "lane_pg.facade.connection",
    "lane_pg.facade.drivers": "lane_pg.facade",
    "lane_pg.facade.drivers.local": "lane_pg.memory.local",
    "lane_pg.facade.drivers.null": "lane_pg.facade.null",
    "lane_pg.facade.drivers.sync": "lane_pg.facade.sync",
    "lane_pg.facade.drivers.failover": "lane_pg.facade.failover",
}
"""Old module path -> where it lives now."""

_LONGEST_FIRST = sorted(MOVED.items(), key=lambda item: -len(item[0]))
"""A moved package's submodule that moved on its own matches before the package."""


def new_home(name: str) -> str:
    """Where module ``name`` lives now (itself when it did not move)."""
    for old, new in _LONGEST_FIRST:
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return name


class _Alias:
    """The loader of an old path: the module at its new home (``importlib.abc.Loader``'s
    protocol, not its class: ``importlib.abc`` costs 22 ms of every import of lane_pg)."""

    def __init__(self, target: str) -> None:
        self._target = target

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self._target}: import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(self._target)

    def exec_module(self, module: ModuleType) -> None:
        return None


class _MovedFinder:
    """``sys.meta_path``'s entry for the old paths (the ``MetaPathFinder`` protocol)."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        home = new_home(fullname)
        if home == fullname:
            return None
        # typeshed's LoaderProtocol asks for the deprecated load_module; exec_module serves.
        return importlib.util.spec_from_loader(fullname, _Alias(home))  # type: ignore[arg-type]


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once: a moved package's old path resolves
    to the new package, whose ``__path__`` the default finder would otherwise use to load
    a second copy of a submodule under the old name."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())


install()
