"""Every setting says what it does, in which group, and docs/settings.md prints them all.

The reference is generated from the fields (base/settings_doc.py), so these tests guard its
inputs: a setting added without help or with an unknown group fails here, before the page
could go out with a hole in it.
"""

from __future__ import annotations

import dataclasses

import pytest

from hermes_lcm.base.setting_rules import BOUNDS, CHOICES, GROUPS, setting
from hermes_lcm.base.settings_doc import _cell, settings_reference
from hermes_lcm.config import LcmConfig, env_name

FIELDS = dataclasses.fields(LcmConfig)


def test_every_setting_has_help_and_a_known_group() -> None:
    missing = [f.name for f in FIELDS if not str(f.metadata.get("help", "")).strip()]
    assert not missing, f"give these settings a help text (setting(..., help)): {missing}"
    strays = {
        f.name: f.metadata.get("group") for f in FIELDS if f.metadata.get("group") not in GROUPS
    }
    assert not strays, f"settings outside base/setting_rules.GROUPS: {strays}"
    assert {f.metadata["group"] for f in FIELDS} == set(GROUPS), "a group with no setting"


def test_the_reference_lists_every_setting_once_with_its_default() -> None:
    rows = {}
    for line in settings_reference().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if cells[0].startswith("`LCM_"):
            assert len(cells) == 4, line
            assert cells[0].strip("`") not in rows, f"listed twice: {cells[0]}"
            rows[cells[0].strip("`")] = cells
    assert set(rows) == {env_name(f.name) for f in FIELDS}
    for f in FIELDS:
        variable, default, values, effect = rows[env_name(f.name)]
        assert effect == " ".join(f.metadata["help"].split())
        if isinstance(f.default, bool):
            assert (default, values) == (str(f.default).lower(), "boolean")
        elif isinstance(f.default, int | float):
            assert float(default) == f.default and ".." in values, variable
        if f.name in CHOICES:
            assert all(f"`{c}`" in values for c in CHOICES[f.name] if c), variable


def test_the_reference_follows_the_groups_order_with_a_table_each() -> None:
    text = settings_reference()
    headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    assert headings == list(GROUPS)
    assert text.count("| variable | default | range/choices | effect |") == len(GROUPS)


def test_ranges_are_the_loaders_own() -> None:
    rows = {line.split(" | ")[0].strip("| `"): line for line in settings_reference().splitlines()}
    assert "| 0.01..1 |" in rows["LCM_CONTEXT_THRESHOLD"]
    assert "| 0..100,000,000 |" in rows["LCM_RESERVE_TOKENS"]
    assert "| -1..64 |" in rows["LCM_INCREMENTAL_MAX_DEPTH"]
    assert set(BOUNDS) <= {f.name for f in FIELDS}


def test_a_cell_stays_one_cell() -> None:
    """A newline would end the table row and a bare pipe would split it."""
    assert _cell("a | b\n  c") == "a \\| b c"
    for f in FIELDS:
        assert "\n" not in f.metadata["help"] and len(f.metadata["help"]) <= 140, f.name


def test_an_unknown_group_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown settings group"):
        setting(0, "Misc", "anything")
