"""``/lcm``: operator commands acting on the live engine copy."""

from __future__ import annotations

import json

from .engine import live_engines
from .status import engine_status

HELP = "/lcm [status|help]"


def handle_command(raw_args: str = "") -> str:
    words = (raw_args or "").split()
    verb = words[0] if words else "status"
    if verb == "help":
        return HELP
    if verb == "status":
        engines = live_engines()
        if not engines:
            return "hermes-lcm: no live engine in this process yet (send a message first)"
        return json.dumps(engine_status(engines[-1]), indent=2, default=str)
    return f"unknown /lcm command {verb!r}; {HELP}"
