"""One setting read with where it came from, or written into config.yaml's ``lcm:`` block.

``lcm config get`` and ``lcm config set`` (lossless-claw's ``lcm config``) work on the settings a
process started here would run with. A write is one validated value: parsed and checked as the
loader checks it, placed on its own line in the ``lcm:`` block (its old line, and the lines of a
multi-line old value, replaced; else a line added at the end of the block; else the block added
at the end of the file), every other byte of the file kept. The new file is loaded back and must
hold the value before it replaces the old one, atomically (a temporary file beside it, fsynced,
then renamed), with the old file's permissions.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..base.peer_settings import norm
from ..base.setting_rules import PARSERS, validate
from ..config import LcmConfig, env_name, load_for_home

FIELDS = {f.name: f for f in dataclasses.fields(LcmConfig)}
_SOURCES = {"env": "environment", "yaml": "config.yaml"}


class SettingsFileError(ValueError):
    """A setting that cannot be read or written; the text says why."""


def field_named(name: str) -> dataclasses.Field[Any]:
    """Our field for ``name``: its own name, its ``LCM_`` variable, or either in another case
    or spelling (``freshTailCount``)."""
    wanted = norm(re.sub(r"^lcm_", "", name.strip(), flags=re.I))
    for field_name, spec in FIELDS.items():
        if norm(field_name) == wanted:
            return spec
    raise SettingsFileError(f"no setting {name!r} (`lcm doctor` and docs/settings.md list them)")


def _type(spec: dataclasses.Field[Any]) -> str:
    return spec.type if isinstance(spec.type, str) else spec.type.__name__


def get_setting(name: str, env: Mapping[str, str], home: Path) -> dict[str, Any]:
    spec = field_named(name)
    loaded = load_for_home(env, home)
    source = loaded.sources.get(spec.name)
    return {
        "setting": spec.name,
        "variable": env_name(spec.name),
        "value": getattr(loaded.config, spec.name),
        "source": _SOURCES.get(source or "", source or "default"),
        "default": spec.default,
        "help": spec.metadata.get("help", ""),
        "problems": [p for p in loaded.problems if env_name(spec.name) in p or spec.name in p],
    }


def all_settings(env: Mapping[str, str], home: Path, changed_only: bool = False) -> dict[str, Any]:
    """Every setting with its value and source, one row each (``lcm config get`` without a key;
    a setting's variable is ``LCM_`` and its name upper-cased, and ``get KEY`` says it);
    ``changed_only``: only those set in the environment or config.yaml."""
    loaded = load_for_home(env, home)
    rows = []
    for name in FIELDS:
        source = loaded.sources.get(name)
        if changed_only and not source:
            continue
        rows.append(
            {
                "setting": name,
                "value": getattr(loaded.config, name),
                "source": _SOURCES.get(source or "", source or "default"),
            }
        )
    return {"items": rows, **({"problems": list(loaded.problems)} if loaded.problems else {})}


def set_setting(name: str, text: str, env: Mapping[str, str], home: Path) -> dict[str, Any]:
    spec = field_named(name)
    try:
        value = PARSERS[_type(spec)](text)
        validate(spec.name, value)
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise SettingsFileError(f"{spec.name}={text!r} is invalid: {exc}") from exc
    path = home / "config.yaml"
    before = path.read_bytes().decode("utf-8") if path.is_file() else ""  # its own line ends
    after = with_setting(before, spec.name, _render(value))
    try:
        data = yaml.safe_load(after) or {}
    except yaml.YAMLError as exc:  # pragma: no cover - with_setting keeps the file's own syntax
        raise SettingsFileError(f"{path}: the edit would not parse ({exc})") from exc
    block = data.get("lcm") if isinstance(data, Mapping) else None
    written = next((v for k, v in (block or {}).items() if norm(k) == norm(spec.name)), None)
    if PARSERS[_type(spec)](written) != value:
        raise SettingsFileError(f"{path}: the edit did not read back as {value!r}; nothing written")
    home.mkdir(parents=True, exist_ok=True)
    _replace(path, after)
    shadowed = env_name(spec.name) in env
    return {
        "setting": spec.name,
        "value": value,
        "file": str(path),
        "written": after != before,
        "note": (
            f"{env_name(spec.name)} is set in the environment and wins over config.yaml"
            if shadowed
            else "in force for the next engine started here (a running host reads it at its start)"
        ),
    }


def _render(value: Any) -> str:
    """A YAML scalar for ``value``: JSON's forms are YAML's (a string double-quoted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)


_TOP_LCM = re.compile(r"^lcm\s*:\s*(#.*)?$")


def with_setting(text: str, field_name: str, rendered: str) -> str:
    """``text`` with ``field_name: rendered`` in its ``lcm:`` block; every other line as it was."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _TOP_LCM.match(line.rstrip("\r\n"))), None)
    if start is None:
        if any(re.match(r"^lcm\s*:", line) for line in lines):
            raise SettingsFileError(
                "config.yaml's lcm: block is written inline (lcm: {...}); set this one by hand"
            )
        tail = "" if not text or text.endswith("\n") else "\n"
        return f"{text}{tail}lcm:\n  {field_name}: {rendered}\n"
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t#"):
        end += 1
    children = [
        i
        for i in range(start + 1, end)
        if lines[i].strip() and not lines[i].lstrip().startswith("#")
    ]
    indent = re.match(r"^[ \t]*", lines[children[0]]).group(0) if children else "  "  # type: ignore[union-attr]
    newline = "\r\n" if lines[start].endswith("\r\n") else "\n"
    for i in children:
        line = lines[i]
        key = re.match(rf"^{re.escape(indent)}([^\s:#][^:#]*?)\s*:(\s|$)", line)
        if key is None or norm(key.group(1).strip("'\"")) != norm(field_name):
            continue
        stop = i + 1  # the lines of a multi-line old value are more indented
        while stop < end and (not lines[stop].strip() or _deeper(lines[stop], indent)):
            stop += 1
        while stop > i + 1 and not lines[stop - 1].strip():
            stop -= 1  # blank lines after it stay
        return "".join([*lines[:i], f"{indent}{key.group(1)}: {rendered}{newline}", *lines[stop:]])
    last = children[-1] + 1 if children else start + 1
    if last == len(lines) and lines and not lines[-1].endswith("\n"):
        lines[-1] += newline
    return "".join([*lines[:last], f"{indent}{field_name}: {rendered}{newline}", *lines[last:]])


def _deeper(line: str, indent: str) -> bool:
    return len(line) - len(line.lstrip(" \t")) > len(indent)


def _replace(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, scratch = tempfile.mkstemp(prefix=".config.yaml.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(scratch, mode)
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
