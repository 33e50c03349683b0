"""Regenerate the extract of GitHub's REST API description the contract test reads.

GitHub publishes its OpenAPI description in the npm package ``@octokit/openapi``.
This keeps only the operations the GitHub executor calls, dereferenced, without
prose and examples, for api.github.com (as pinned, and as API version 2026-03-10
after applying the description's ``x-github-breaking-changes``) and for GitHub
Enterprise Server 3.17::

    python3 tests/data/github-openapi/extract.py            # npm pack into a temp folder
    python3 tests/data/github-openapi/extract.py PACKAGE    # an unpacked package or .tgz

OpenAPI 3.0's ``nullable: true`` becomes JSON Schema's "or null", so that
``jsonschema`` reads the extract as GitHub means it. One more change is made on
purpose: the dispatch request body gets
``additionalProperties: false``. GitHub refuses unknown keys there (``422``), and
the contract must fail when the executor sends a field a version does not have
(``return_run_details`` to GitHub Enterprise Server or to 2026-03-10).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

PACKAGE = "@octokit/openapi"
VERSION = "23.0.2"
HERE = Path(__file__).resolve().parent
OPERATIONS = (
    "actions/create-workflow-dispatch",
    "actions/list-workflow-runs",
    "actions/get-workflow-run",
    "actions/list-jobs-for-workflow-run",
    "actions/cancel-workflow-run",
    "actions/list-workflow-run-artifacts",
    "actions/download-artifact",
    # a 404 for a run: can the token read the repository's runs at all?
    "actions/list-workflow-runs-for-repo",
    # the 60-day auto-disable of scheduled workflows: a workflow's state, and enabling it
    "actions/get-workflow",
    "actions/enable-workflow",
    # who cancelled a run: GitHub's annotation on the cancelled job's check run
    "checks/list-annotations",
)
DESCRIPTIONS = {
    # output name: (file in the package's generated/ folder, API version or None)
    "api.github.com": ("api.github.com.deref.json", None),
    "api.github.com-2026-03-10": ("api.github.com.deref.json", "2026-03-10"),
    "ghes-3.17": ("ghes-3.17.deref.json", None),
}
_PROSE = {"description", "examples", "example", "summary", "externalDocs"}


def _strip(schema: Any) -> Any:
    """``schema`` without prose; ``properties`` maps names (which may be ``description``)."""
    if isinstance(schema, list):
        return [_strip(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("nullable") is True:
        # OpenAPI 3.0's `nullable` is not JSON Schema: spell it as "or null"
        rest = {k: v for k, v in schema.items() if k != "nullable"}
        if "type" in rest and "enum" not in rest:
            return _strip({**rest, "type": [rest["type"], "null"]})
        return {"anyOf": [_strip(rest), {"type": "null"}]}
    out = {}
    for key, value in schema.items():
        if key in _PROSE:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _strip(sub) for name, sub in value.items()}
        else:
            out[key] = _strip(value)
    return out


def _pointer(path: str) -> list[str]:
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def _patch(document: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    """Apply the JSON Patch operations GitHub lists for a breaking change."""
    for op in ops:
        *parents, last = _pointer(op["path"])
        target: Any = document
        for part in parents:
            target = target[part]
        if op["op"] == "remove":
            del target[last]
        elif op["op"] in ("replace", "add"):
            target[last] = op["value"]
        else:
            raise ValueError(f"unsupported patch operation {op['op']!r}")


def _operation(op: dict[str, Any], version: str | None) -> dict[str, Any]:
    op = copy.deepcopy(op)
    if version is not None:
        for change in op.get("x-github-breaking-changes", []):
            if change["version"] <= version:
                _patch(op, change["patch"])
    body = (op.get("requestBody") or {}).get("content", {}).get("application/json", {})
    request = body.get("schema")
    if request is not None:
        request = {**request, "additionalProperties": False}
    responses = {}
    for status, answer in op["responses"].items():
        content = (answer.get("content") or {}).get("application/json")
        responses[status] = None if content is None else _strip(content["schema"])
    return {
        "parameters": [
            {"name": p["name"], "in": p["in"], "required": bool(p.get("required")),
             "schema": _strip(p.get("schema", {}))}
            for p in op.get("parameters", [])
        ],
        "request": None if request is None else _strip(request),
        "responses": responses,
    }


def extract(generated: Path, file: str, version: str | None) -> dict[str, Any]:
    spec = json.loads((generated / file).read_text(encoding="utf-8"))
    operations = {}
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and op.get("operationId") in OPERATIONS:
                operations[op["operationId"]] = {"method": method.upper(), "path": path,
                                                 **_operation(op, version)}
    missing = set(OPERATIONS) - set(operations)
    if missing:
        raise SystemExit(f"{file}: no operation {sorted(missing)}")
    return {
        "package": f"{PACKAGE}@{VERSION}",
        "source": f"generated/{file}",
        "api_version": version,
        "operations": dict(sorted(operations.items())),
        "error": _strip(_basic_error(generated / file.replace(".deref", ""))),
    }


def _basic_error(plain: Path) -> dict[str, Any]:
    """GitHub's error body (``message``, ``documentation_url``), from the description
    that keeps its components (the dereferenced one has none)."""
    spec = json.loads(plain.read_text(encoding="utf-8"))
    schema: dict[str, Any] = spec["components"]["schemas"]["basic-error"]
    return schema


def _unpacked(source: Path, into: Path) -> Path:
    if source.is_dir():
        return source / "generated"
    with tarfile.open(source) as archive:
        archive.extractall(into, filter="data")
    return into / "package" / "generated"


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        if argv:
            generated = _unpacked(Path(argv[0]), Path(tmp))
        else:
            subprocess.run(["npm", "pack", f"{PACKAGE}@{VERSION}", "--silent"], cwd=tmp,
                           check=True)
            [tgz] = Path(tmp).glob("*.tgz")
            generated = _unpacked(tgz, Path(tmp))
        for name, (file, version) in DESCRIPTIONS.items():
            data = extract(generated, file, version)
            out = HERE / f"{name}.json"
            out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            print(f"{out.relative_to(HERE.parents[2])}: {out.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
