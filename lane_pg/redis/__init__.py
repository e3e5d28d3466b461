"""The Redis backend (in progress): the contract's operations as Lua scripts on Redis.

What stands so far is the ground every operation will stand on:

* ``scripts``: one ``.lua`` file per operation under ``lua/``, its ``-- @include``
  lines expanded at load, called through EVALSHA and loaded again after a NOSCRIPT
  (a restarted or flushed server), arguments and results as JSON (Redis's cjson);
* ``keys``: every key of a queue under one hash tag, so each script of a queue touches
  one cluster slot, and the check that refuses an operation spanning two tags;
* ``server``: the start-up checks (``maxmemory-policy noeviction``: an evicted queue key
  loses jobs; a server recent enough for the scripts) and the connection.

``redis://`` is not yet a backend URL: ``lane_pg.backend.url`` registers it once the
contract's operations pass the conformance suite.
"""

from __future__ import annotations
