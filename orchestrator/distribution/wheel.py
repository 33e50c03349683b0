"""A wheel of the running code, the same bytes every time for the same files.

The wheel is packed from the ``orchestrator`` package folder this process imported:
a source checkout (an editable install) and an installed wheel hold the same files, so
both give the same wheel. It holds what setuptools puts in one (a test compares): the
``.py`` files of every package, ``py.typed`` and everything under ``data/``, never
``__pycache__`` or hidden files.

Reproducible: entries sorted, every timestamp 1980-01-01 (the earliest a zip can
hold), modes ``0644``, one compression level, and metadata written from
:mod:`orchestrator.distribution` rather than from whatever installed the code.
"""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from . import DEPENDENCIES, ENTRY_POINTS, NAME, REQUIRES_PYTHON, SUMMARY, WHEEL_NAME
from . import wheel_filename as _filename

PACKAGE = Path(__file__).resolve().parents[1]
"""The ``orchestrator`` folder this process runs from."""
EPOCH = (1980, 1, 1, 0, 0, 0)
LEVEL = 9
"""Deflate level; fixed, since the hash must not depend on a default."""


@dataclass(frozen=True)
class Wheel:
    filename: str
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def package_files(root: Path = PACKAGE) -> Iterator[tuple[str, bytes]]:
    """``(path in the wheel, bytes)`` of every file the package ships, sorted."""
    found: list[tuple[str, Path]] = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if not path.is_file() or any(p.startswith(".") or p == "__pycache__"
                                     for p in rel.parts):
            continue
        in_data = rel.parts[0] == "data"
        if in_data or path.suffix == ".py" or rel.as_posix() == "py.typed":
            found.append((f"{root.name}/{rel.as_posix()}", path))
    for name, path in sorted(found):
        yield name, path.read_bytes()


def _metadata(version: str) -> dict[str, bytes]:
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version}",
             f"Summary: {SUMMARY}", f"Requires-Python: {REQUIRES_PYTHON}"]
    lines += [f"Requires-Dist: {dep}" for dep in DEPENDENCIES]
    wheel = ["Wheel-Version: 1.0", f"Generator: {NAME} ({version})",
             "Root-Is-Purelib: true", "Tag: py3-none-any"]
    scripts = ["[console_scripts]"] + [f"{k} = {v}" for k, v in sorted(ENTRY_POINTS.items())]
    return {
        "METADATA": ("\n".join(lines) + "\n").encode(),
        "WHEEL": ("\n".join(wheel) + "\n").encode(),
        "entry_points.txt": ("\n".join(scripts) + "\n").encode(),
        "top_level.txt": f"{PACKAGE.name}\n".encode(),
    }


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _add(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o100644 << 16
    info.create_system = 3  # unix, so the mode above is read
    archive.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=LEVEL)


def build(root: Path = PACKAGE, version: str = __version__) -> Wheel:
    """The wheel of the package at ``root`` (default: the running one), in memory."""
    info = f"{WHEEL_NAME}-{version}.dist-info"
    entries = list(package_files(root))
    entries += [(f"{info}/{name}", data) for name, data in sorted(_metadata(version).items())]
    record = [_record_line(name, data) for name, data in entries] + [f"{info}/RECORD,,"]
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in entries:
            _add(archive, name, data)
    return Wheel(_filename(version), buffer.getvalue())
