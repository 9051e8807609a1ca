"""Config errors in one line each: the key path, what is allowed there, the nearest valid
names (config/schema.yaml, checked by jsonschema). jsonschema's own messages name neither the
path nor the fix ("Additional properties are not allowed ('configs' was unexpected)", "'10'
is not valid under any of the given schemas"), and Snakemake's add the whole schema."""

from __future__ import annotations

import difflib
from pathlib import Path

SCHEMA = Path(__file__).resolve().parents[2] / "config/schema.yaml"
DOCS = "config/README.md"


def load_schema() -> dict:
    import yaml

    return yaml.safe_load(SCHEMA.read_text())


def resolved(node: dict, schema: dict) -> dict:
    """A schema node with its local $ref followed and its allOf parts' properties merged."""
    while isinstance(node, dict) and "$ref" in node:
        target = schema
        for part in node["$ref"].lstrip("#/").split("/"):   # a local JSON pointer
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    if isinstance(node, dict) and "allOf" in node:
        merged = {k: v for k, v in node.items() if k != "allOf"}
        for part in node["allOf"]:
            part = resolved(part, schema)
            merged.setdefault("properties", {}).update(part.get("properties", {}))
            for key in ("additionalProperties", "patternProperties", "type"):
                if key in part:
                    merged.setdefault(key, part[key])
        node = merged
    return node if isinstance(node, dict) else {}


def allowed(node: dict, schema: dict) -> str:
    """What a schema node accepts, in words: "a number > 0 or 'inf'"."""
    node = resolved(node, schema)
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(dict.fromkeys(allowed(part, schema) for part in node[key]))
    if "const" in node:
        return repr(node["const"])
    if "enum" in node:
        return "one of " + ", ".join(map(repr, node["enum"]))
    kinds = node.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds] if kinds else []
    words = {"number": "a number", "integer": "a whole number", "string": "a string", "boolean": "true or false",
             "object": "a mapping", "array": "a list", "null": "null"}
    out = " or ".join(words.get(k, k) for k in kinds) or "anything"
    bounds = [f"{op} {node[key]:g}" for key, op in (("exclusiveMinimum", ">"), ("minimum", ">="),
                                                   ("exclusiveMaximum", "<"), ("maximum", "<="))
              if isinstance(node.get(key), (int, float))]
    return f"{out} {' and '.join(bounds)}" if bounds else out


def unexpected_keys(error) -> list[str]:
    props = set(error.schema.get("properties", {}))
    patterns = error.schema.get("patternProperties", {})
    import re

    return [k for k in error.instance if k not in props and not any(re.search(p, str(k)) for p in patterns)]


def one_line(error, schema: dict) -> str:
    """One jsonschema error as one line: where, what is wrong, what is allowed, the fix."""
    path = ".".join(map(str, error.absolute_path)) or "(top level)"
    node = resolved(error.schema, schema)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        names = list(node.get("properties", {}))
        out = []
        for key in unexpected_keys(error):
            fix = [f"{path}.{child}.{key}" for child, sub in node.get("properties", {}).items()
                   if key in resolved(sub, schema).get("properties", {})]
            near = difflib.get_close_matches(str(key), names, n=3, cutoff=0.6)
            hint = (f"it belongs one level down: {' or '.join(fix)}" if fix else
                    f"did you mean {' or '.join(near)}?" if near else
                    f"allowed here: {', '.join(names[:15])}{', ...' if len(names) > 15 else ''}")
            out.append(f"{path}: unknown key {key!r}; {hint} ({DOCS})")
        return "; ".join(out)
    if error.validator in ("oneOf", "anyOf", "type", "const", "minimum", "maximum", "exclusiveMinimum",
                           "exclusiveMaximum"):
        return f"{path}: {error.instance!r} is not allowed: give {allowed(node, schema)}"
    if error.validator == "enum":
        options = {str(v).lower(): str(v) for v in node["enum"]}
        near = [options[n] for n in difflib.get_close_matches(str(error.instance).lower(), list(options), n=3,
                                                               cutoff=0.5)]
        return (f"{path}: {error.instance!r} is not {allowed(node, schema)}"
                + (f"; did you mean {' or '.join(near)}?" if near else ""))
    if error.validator == "required":
        return f"{path}: {error.message} (give it: {DOCS})"
    return f"{path}: {error.instance!r}: {error.message}"


def problems(config: dict) -> list[str]:
    """Every place the config breaks config/schema.yaml, a line each, ordered by key path."""
    import jsonschema

    schema = load_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    return [one_line(e, schema) for e in errors]
