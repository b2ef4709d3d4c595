"""The JSON Schema of release.json, shipped as package data beside this module."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from trtconv.backends.registry import backend_choices

SCHEMA_FILE = "release.schema.json"


def release_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) that every release.json validates against, with the
    registered backends as the choices of `requested_backend`."""
    text = resources.files("trtconv.release").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    # The backends a target may request are the registered ones: the file cannot know them.
    target = schema["$defs"]["target"]["properties"]
    target["requested_backend"] = {"enum": list(backend_choices())}
    return schema
