"""Tokens the lcm_* tool schemas add to every request (o200k), as the host sends them.

One command: ``.venv/bin/python bench/schemas.py``.

The host wraps each schema from ``engine.get_tool_schemas()`` as
``{"type": "function", "function": schema}`` and sends the list with every request; that JSON
is what is counted here, per tool and all together (default configuration, all tools shown).
"""

from __future__ import annotations

import json

from common import make_engine, print_table, save_result, temp_dir

from hermes_lcm.base.tokens import count_tokens

TARGET_TOKENS = 4000


def wrapped(schema: dict[str, object]) -> dict[str, object]:
    return {"type": "function", "function": schema}


def main() -> None:
    engine = make_engine(temp_dir("schemas"))
    schemas = engine.get_tool_schemas()
    per_tool = {
        str(s["name"]): count_tokens(json.dumps(wrapped(s), ensure_ascii=False)) for s in schemas
    }
    total = count_tokens(json.dumps([wrapped(s) for s in schemas], ensure_ascii=False))
    for name, tokens in per_tool.items():
        print(f"  {name:28} {tokens:6}")
    print(f"  {'all ' + str(len(schemas)) + ' tools':28} {total:6}")
    rows = [
        {
            "target": f"all tool schemas together <= {TARGET_TOKENS:,} tokens (o200k)",
            "ours": f"{total:,} tokens for {len(schemas)} tools",
            "reference": "LCM-X: 8-9k tokens of tool schemas on every turn",
            "verdict": "met"
            if total <= TARGET_TOKENS
            else f"missed by {total - TARGET_TOKENS:,} tokens",
        }
    ]
    print_table(rows)
    save_result("schemas", rows, {"per_tool": per_tool, "total": total, "tools": len(schemas)})


if __name__ == "__main__":
    main()
