"""The CLI's stand-in for pydantic's plugin loader (``orchestrator/support/process.py``).

The stand-in answers for pydantic what its loader would: these tests read the installed
release's loader, so a release that changes it fails here before the CLI trusts it."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any, NoReturn

import pydantic
import pytest

from orchestrator.support import process


def _real_loader() -> types.ModuleType:
    module = sys.modules.get(process.LOADER)
    if isinstance(module, process._DeferredLoader):
        return module.real()
    return importlib.import_module(process.LOADER)


def _no_entry_points(*args: Any, **kwargs: Any) -> NoReturn:
    raise AssertionError("pydantic's loader read the installed distributions' entry points")


def test_the_installed_pydantic_is_a_release_whose_loader_was_read() -> None:
    assert process.known_release(pydantic.VERSION), (
        f"pydantic {pydantic.VERSION} is not in orchestrator.support.process.CHECKED: read "
        "its pydantic/plugin/_loader.py; if get_plugins() still returns () for each of "
        "OFF before it reads any entry point, add the release to CHECKED")


@pytest.mark.parametrize("off", process.OFF)
def test_pydantic_s_loader_answers_no_plugin_before_reading_entry_points(
        monkeypatch: pytest.MonkeyPatch, off: str) -> None:
    loader = _real_loader()
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", off)
    monkeypatch.setattr(loader, "_plugins", None)  # as in a fresh process
    monkeypatch.setattr(loader, "_loading_plugins", False)
    # 2.13 reads importlib_metadata.distributions(), 2.14 entry_points(group=...)
    monkeypatch.setattr(loader, "entry_points", _no_entry_points, raising=False)
    monkeypatch.setattr(loader, "importlib_metadata",
                        types.SimpleNamespace(distributions=_no_entry_points), raising=False)
    assert tuple(loader.get_plugins()) == ()
    assert loader._plugins is None  # nothing was cached: the answer came before the scan


@pytest.mark.parametrize("off", process.OFF)
def test_the_stand_in_answers_no_plugin_without_the_real_loader(
        monkeypatch: pytest.MonkeyPatch, off: str) -> None:
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", off)
    stand_in = process._DeferredLoader(process.LOADER)
    monkeypatch.setattr(stand_in, "real", _no_entry_points)
    assert tuple(stand_in.get_plugins()) == ()


def test_the_stand_in_hands_other_settings_releases_and_questions_to_the_real_loader(
        monkeypatch: pytest.MonkeyPatch) -> None:
    loader = _real_loader()
    asked: list[str] = []

    def real() -> types.ModuleType:
        asked.append("real")
        return loader

    stand_in = process._DeferredLoader(process.LOADER)
    monkeypatch.setattr(stand_in, "real", real)
    monkeypatch.setattr(loader, "get_plugins", lambda: ("a plugin",))
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "logfire")  # one plugin off, others on
    assert tuple(stand_in.get_plugins()) == ("a plugin",)
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "__all__")
    monkeypatch.setattr(pydantic, "VERSION", "2.99.0")  # a release nobody read
    assert tuple(stand_in.get_plugins()) == ("a plugin",)
    assert stand_in.PYDANTIC_ENTRY_POINT_GROUP == loader.PYDANTIC_ENTRY_POINT_GROUP
    assert asked == ["real", "real", "real"]
