"""The CLI process's own settings, which the tracks it starts do not inherit.

pydantic looks for plugins the first time a model validates: it reads the entry points
of every installed distribution and imports each plugin it finds. The orchestrator's
models are its own records, and no plugin is wanted on them: a plugin installed beside
it would observe every record a tick reads, and slow every command (a plugin like
logfire's costs over 100 ms). So the CLI turns them off as pydantic documents,
``PYDANTIC_DISABLE_PLUGINS=__all__``, unless the environment already says something.

pydantic's loader still imports :mod:`importlib.metadata` (with :mod:`email` and more)
when it is first asked, about 32 M instructions of a no-op tick's 1,100 (3 %). With
that setting its answer is known without the import: no plugin. :class:`_DeferredLoader`
gives it, only for the pydantic releases whose loader was read (:data:`CHECKED`), and
hands every other question, other releases and a setting that enables plugins to the
real loader. Invariants:

- the stand-in answers only ``get_plugins()`` with no arguments, only while
  ``PYDANTIC_DISABLE_PLUGINS`` is one of :data:`OFF`, only on a release in
  :data:`CHECKED`; its answer is ``()``, what that release's loader returns then;
- anything else imports the real loader and puts it in ``sys.modules`` in its place;
- ``tests/unit/test_process.py`` fails when the installed pydantic is not in
  :data:`CHECKED`, or when its loader no longer returns ``()`` for each of :data:`OFF`
  before it reads any entry point: a new release is read before it is trusted.

A track is the user's code: its environment is the one the orchestrator was given,
without what :func:`settle` added (:func:`given`).
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Iterable, Mapping
from typing import Any

OWN = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}
"""Set for the CLI's process when its environment does not set them."""

_added: dict[str, str] = {}


def settle() -> None:
    """Apply :data:`OWN` where the environment is silent (the CLI's first step)."""
    for name, value in OWN.items():
        if name not in os.environ:
            os.environ[name] = _added[name] = value
    if LOADER not in sys.modules:
        sys.modules[LOADER] = _DeferredLoader(LOADER)


def given(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without what :func:`settle` added to this process's environment."""
    return {k: v for k, v in env.items() if k not in _added or _added[k] != v}


LOADER = "pydantic.plugin._loader"
OFF = ("__all__", "1", "true")
"""The values of ``PYDANTIC_DISABLE_PLUGINS`` with which pydantic loads no plugin."""
CHECKED = ("2.13.", "2.14.")
"""pydantic releases whose ``get_plugins`` returns ``()`` for each of :data:`OFF` before
it reads any entry point (read in their source: ``elif disabled_plugins in ('__all__',
'1', 'true'): return ()``)."""


def known_release(version: str) -> bool:
    return version.startswith(CHECKED)


class _DeferredLoader(types.ModuleType):
    """pydantic's plugin loader, imported only when its answer is not known."""

    def get_plugins(self, *args: Any, **kwargs: Any) -> Iterable[Any]:
        import pydantic  # imported by now: it is asking

        if (not args and not kwargs and known_release(pydantic.VERSION)
                and os.environ.get("PYDANTIC_DISABLE_PLUGINS") in OFF):
            return ()
        return self.real().get_plugins(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system asks (is it a package?)
            raise AttributeError(name)
        return getattr(self.real(), name)

    def real(self) -> types.ModuleType:
        """The real loader, in ``sys.modules`` from now on."""
        if sys.modules.get(LOADER) is self:
            del sys.modules[LOADER]
        return importlib.import_module(LOADER)
