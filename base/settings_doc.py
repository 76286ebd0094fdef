"""The settings reference (docs/settings.md), printed from the settings themselves.

Each :class:`~hermes_lcm.config.LcmConfig` field carries its help and group, and the ranges and
choices are the loader's own checks (:mod:`.setting_rules`), so the page says what the code does
by construction; scripts/docs.py writes it and a test fails when the page is stale. Only the
docs script and the tests import this module: the plugin never renders its own reference, so
the cold start does not pay for it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..config import LcmConfig, env_name
from .setting_rules import BOUNDS, CHOICES, GROUPS


def settings_reference() -> str:
    """Per group a heading and a table ``variable | default | range/choices | effect``."""
    fields = dataclasses.fields(LcmConfig)
    sections = []
    for group in GROUPS:
        rows = [
            "| "
            + " | ".join(
                (
                    f"`{env_name(spec.name)}`",
                    _default(spec.default),
                    _values(spec),
                    _cell(spec.metadata["help"]),
                )
            )
            + " |"
            for spec in fields
            if spec.metadata.get("group") == group
        ]
        if rows:
            table = ["| variable | default | range/choices | effect |", "| --- | --- | --- | --- |"]
            sections.append("\n".join((f"## {group}", "", *table, *rows)))
    return "\n\n".join(sections) + "\n"


def _default(value: Any) -> str:
    """The default as an operator would write it (and as the guide's tables always did)."""
    if isinstance(value, bool):
        return str(value).lower()
    if value == "":
        return '""'
    if isinstance(value, float):
        return _number(value)
    return _cell(str(value))


def _values(spec: dataclasses.Field[Any]) -> str:
    if spec.name in BOUNDS:
        low, high = BOUNDS[spec.name]
        return f"{_number(low)}..{_number(high)}"
    if spec.name in CHOICES:
        return ", ".join(f"`{choice}`" if choice else '`""`' for choice in CHOICES[spec.name])
    if isinstance(spec.default, bool):
        return "boolean"
    return _cell(spec.metadata.get("form") or "text")


def _number(value: float) -> str:
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}"


def _cell(text: str) -> str:
    """One table cell: a newline would end the row and a bare pipe would split it."""
    return " ".join(text.split()).replace("|", "\\|")
