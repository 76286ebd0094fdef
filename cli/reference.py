"""The ``lcm`` reference (docs/cli.md), printed from the real parser so it cannot drift from it.

Every verb, its help, a one-line usage and its options (flags, help, choices, defaults) come from
the argparse objects main.parser() builds. The usage line is drawn here rather than by argparse's
formatter: argparse wraps it to the terminal (``COLUMNS``) and its layout changes between Python
versions, and the doc must read the same wherever it is generated.
"""

from __future__ import annotations

import argparse

from .common import subcommands

WIDTH = 88  # usage lines wrap here, not at the terminal's width

GLOBAL_NOTE = (
    "`--db` and `--format` may also follow the command (`lcm status --db x.db`); every command "
    "takes `-h`/`--help`."
)


def markdown() -> str:
    """The whole reference: the global options, then each verb in ``lcm --help``'s order."""
    from .main import parser  # main imports every family: only the doc and its test pay for it

    top = parser()
    lines = ["## Global options", "", _fence(usage(top)), ""]
    lines += [_option(a) for a in options(top)]
    lines += ["", GLOBAL_NOTE, "", "## Commands", ""]
    verbs = subcommands(top)
    lines += [f"- [`lcm {name}`](#lcm-{_anchor(name)}): {_help(p)}" for name, p in verbs.items()]
    for name, sub in verbs.items():
        lines += ["", f"### lcm {name}", "", _help(sub), "", _fence(usage(sub))]
        shown = options(sub)
        if shown:
            lines += ["", *[_option(a) for a in shown]]
    return "\n".join(lines) + "\n"


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments a reader should see: not ``--help`` (every command has it) nor the hidden
    repeats of the global options, nor the verb list itself (the Commands section is that)."""
    return [
        a
        for a in parser._actions
        if a.help is not argparse.SUPPRESS
        and not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
    ]


def missing_help() -> list[str]:
    """``lcm VERB ARG`` for each verb or argument without help (the test wants none)."""
    from .main import parser

    top = parser()
    missing = [f"lcm {_flag(a)}" for a in options(top) if not a.help]
    for name, sub in subcommands(top).items():
        missing += [f"lcm {name}"] if not sub.description else []
        missing += [f"lcm {name} {_flag(a)}" for a in options(sub) if not a.help]
    return missing


def usage(parser: argparse.ArgumentParser) -> str:
    """``lcm VERB [--opt X] ARG``, options first as argparse orders them, wrapped at WIDTH columns
    whatever the terminal."""
    shown = [a for a in parser._actions if a.help is not argparse.SUPPRESS]
    words = [
        (_flag(a, a.option_strings[0]) if a.required else f"[{_flag(a, a.option_strings[0])}]")
        for a in shown
        if a.option_strings
    ]
    for a in shown:
        if isinstance(a, argparse._SubParsersAction):
            words.append(f"{_metavar(a)} ...")
        elif not a.option_strings:
            words.append(_positional(a))
    lines, indent = [parser.prog], " " * (len(parser.prog) + 1)
    for word in words:
        if len(lines[-1]) + 1 + len(word) > WIDTH and lines[-1].strip() != "":
            lines.append(indent + word)
        else:
            lines[-1] += " " + word
    return "\n".join(lines)


def _positional(a: argparse.Action) -> str:
    name = _metavar(a)
    if a.nargs == "?":
        return f"[{name}]"
    if a.nargs == "*":
        return f"[{name} ...]"
    if a.nargs == "+":
        return f"{name} [{name} ...]"
    return name


def _flag(a: argparse.Action, name: str = "") -> str:
    """The option as typed (``name``, or its longest spelling), with a value placeholder when it
    takes one."""
    if not a.option_strings:
        return _positional(a)
    name = name or max(a.option_strings, key=len)
    return name if a.nargs == 0 else f"{name} {_metavar(a)}"


def _metavar(a: argparse.Action) -> str:
    if isinstance(a.metavar, str):
        return a.metavar
    if a.choices is not None and not isinstance(a, argparse._SubParsersAction):
        return "{" + ",".join(str(c) for c in a.choices) + "}"
    return a.dest if not a.option_strings else a.dest.upper()


def _option(a: argparse.Action) -> str:
    text = _expand(a)
    notes = []
    if a.required and a.option_strings:
        notes.append("required")
    if a.choices is not None and isinstance(a.metavar, str):
        notes.append("one of " + ", ".join(f"`{c}`" for c in a.choices))
    if a.nargs != 0 and a.default not in (None, argparse.SUPPRESS, []):
        notes.append(f"default `{a.default}`")
    extra = f" ({'; '.join(notes)})" if notes else ""
    return f"- `{_flag(a)}`{extra}: {_prose(text)}"


def _expand(a: argparse.Action) -> str:
    """The help as argparse prints it (``%(default)s`` and the like filled in)."""
    text = str(a.help or "")
    return text % {**vars(a), "prog": "lcm"} if "%" in text else text


def _help(parser: argparse.ArgumentParser) -> str:
    return _prose(parser.description or "")


def _prose(text: str) -> str:
    """Help text as Markdown shows it literally: ``<id>`` is not a tag, ``lcm_*`` no emphasis."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("*", "\\*")


def _fence(text: str) -> str:
    return f"```text\n{text}\n```"


def _anchor(name: str) -> str:
    """GitHub's heading anchor for ``### lcm NAME`` (lowercase, spaces to hyphens)."""
    return name.lower().replace(" ", "-")
