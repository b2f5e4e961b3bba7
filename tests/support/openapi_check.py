"""Validates live answers against the OpenAPI document that the server serves.

    python openapi_check.py DOC.json SAMPLES.json

SAMPLES is a list of {"method", "path" (the document's template), "status", "contentType",
"body"}. Every sample must be documented (its operation and status) and its JSON body must
match the response schema; every operation of the document needs a success sample and, unless
it can answer no error, an error sample. Prints one line per problem; exits 1 if any.
"""
import json
import sys

from jsonschema import Draft202012Validator


def main() -> int:
    doc = json.load(open(sys.argv[1]))
    samples = json.load(open(sys.argv[2]))
    problems = []
    seen = {}
    for s in samples:
        method, path, status = s["method"].lower(), s["path"], str(s["status"])
        where = f"{s['method']} {path} {status}"
        op = doc["paths"].get(path, {}).get(method)
        if op is None:
            problems.append(f"{where}: operation not in the document")
            continue
        seen.setdefault((path, method), set()).add(status)
        response = op["responses"].get(status) or op["responses"].get("default")
        if response is None:
            problems.append(f"{where}: status not documented ({sorted(op['responses'])})")
            continue
        content = response.get("content") or {}
        media = (s.get("contentType") or "").split(";")[0].strip()
        if not media and s["body"] is None:
            # An answer without a body (304): its documented response must have no content.
            if content:
                problems.append(f"{where}: no body, but the document gives {sorted(content)}")
            continue
        if media not in content:
            problems.append(f"{where}: content type {media!r} not documented ({sorted(content)})")
            continue
        schema = content[media].get("schema")
        if schema is None or media != "application/json":
            continue
        rooted = {"allOf": [schema], "components": doc.get("components", {})}
        for error in Draft202012Validator(rooted).iter_errors(s["body"]):
            at = "/".join(str(p) for p in error.absolute_path)
            problems.append(f"{where}: at /{at}: {error.message[:300]}")
    for path, item in doc["paths"].items():
        for method, op in item.items():
            statuses = seen.get((path, method), set())
            documented = set(op["responses"])
            if not any(s.startswith("2") for s in statuses):
                problems.append(f"{method.upper()} {path}: no success answer checked")
            if any(s >= "400" for s in documented) and not any(s >= "400" for s in statuses):
                problems.append(f"{method.upper()} {path}: no error answer checked")
    checked = sum(len(v) for v in seen.values())
    print(f"{len(samples)} answers, {len(seen)} operations, {checked} (operation, status) pairs")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
