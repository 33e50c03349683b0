"""Regenerate the extract of GitHub's REST API description the contract test reads.

GitHub publishes its OpenAPI description in the npm package ``@octokit/openapi``.
This keeps only the operations the GitHub executor, ``orchestrator logs`` and the issue
channel call, dereferenced, without prose and examples, for api.github.com (as
pinned, and as API version 2026-03-10 after applying the description's
``x-github-breaking-changes``) and for GitHub Enterprise Server 3.17::

    python3 tests/data/github-openapi/extract.py            # npm pack into a temp folder
    python3 tests/data/github-openapi/extract.py PACKAGE    # an unpacked package or .tgz

OpenAPI 3.0's ``nullable: true`` becomes JSON Schema's "or null", so that
``jsonschema`` reads the extract as GitHub means it. The issue operations' answers keep
their required properties and those read here (:data:`READS`). One more change is made
on purpose: the workflow dispatch request body gets
``additionalProperties: false``. GitHub refuses unknown keys there (``422``), and
the contract must fail when the executor sends a field a version does not have
(``return_run_details`` to GitHub Enterprise Server or to 2026-03-10). The
repository dispatch (an external clock's call) keeps its body as described.
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
    "repos/create-dispatch-event",
    # notifications: a GitHub issue per failing schedule (orchestrator/notify/issues.py)
    "issues/create",
    "issues/list-for-repo",
    "issues/get",
    "issues/update",
    "issues/create-comment",
    "issues/list-comments",
    # a 404 for a run: can the token read the repository's runs at all?
    "actions/list-workflow-runs-for-repo",
    # the 60-day auto-disable of scheduled workflows: a workflow's state, and enabling it
    "actions/get-workflow",
    "actions/enable-workflow",
    # who cancelled a run: GitHub's annotation on the cancelled job's check run
    "checks/list-annotations",
    # `orchestrator logs` of a leg: its job (is it complete?) and the job's log
    "actions/get-job-for-workflow-run",
    "actions/download-job-logs-for-workflow-run",
)
CLOSED_BODIES = ("actions/create-workflow-dispatch",)
"""Operations whose request body refuses keys it does not list (see above)."""
READS = {
    # operation: the optional properties of its answer kept beside the required ones
    "issues/create": {"body", "state_reason", "pull_request"},
    "issues/list-for-repo": {"body", "state_reason", "pull_request"},
    "issues/get": {"body", "state_reason", "pull_request"},
    "issues/update": {"body", "state_reason", "pull_request"},
    "issues/create-comment": {"body"},
    "issues/list-comments": {"body"},
}
"""The issue operations' answers are large (an issue embeds its repository); their
optional properties that nothing here reads or sends are left out, so the extract
stays small. Every required property is kept, and so every answer is still checked
for all of them."""
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


def _merge(document: dict[str, Any], patch: dict[str, Any]) -> None:
    """Apply a JSON Merge Patch (RFC 7396): ``null`` removes a key, an object merges."""
    for key, value in patch.items():
        if value is None:
            document.pop(key, None)
        elif isinstance(value, dict) and isinstance(document.get(key), dict):
            _merge(document[key], value)
        else:
            document[key] = value


def _patch(document: dict[str, Any], ops: list[dict[str, Any]] | dict[str, Any]) -> None:
    """Apply the patch GitHub lists for a breaking change: JSON Patch operations (a
    list), or a JSON Merge Patch (an object, as the issues endpoints' changes are)."""
    if isinstance(ops, dict):
        _merge(document, ops)
        return
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


def _trim(schema: Any, keep: set[str]) -> Any:
    """``schema`` (an object, or an array of them) with only its required properties
    and those in ``keep``."""
    if not isinstance(schema, dict):
        return schema
    for combined in ("allOf", "anyOf", "oneOf"):
        if combined in schema:
            return {**schema, combined: [_trim(part, keep) for part in schema[combined]]}
    if schema.get("type") == "array":
        return {**schema, "items": _trim(schema.get("items"), keep)}
    if isinstance(schema.get("properties"), dict):
        wanted = set(schema.get("required", [])) | keep
        return {**schema, "properties": {k: v for k, v in schema["properties"].items()
                                         if k in wanted}}
    return schema


def _operation(op: dict[str, Any], version: str | None) -> dict[str, Any]:
    closed = op.get("operationId") in CLOSED_BODIES
    keep = READS.get(op["operationId"])
    op = copy.deepcopy(op)
    if version is not None:
        for change in op.get("x-github-breaking-changes", []):
            if change["version"] <= version:
                _patch(op, change["patch"])
    body = (op.get("requestBody") or {}).get("content", {}).get("application/json", {})
    request = body.get("schema")
    if request is not None and closed:
        request = {**request, "additionalProperties": False}
    responses = {}
    for status, answer in op["responses"].items():
        content = (answer.get("content") or {}).get("application/json")
        schema = None if content is None else _strip(content["schema"])
        responses[status] = _trim(schema, keep) if keep is not None and status < "300" \
            else schema
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
