"""Build ``fixtures/schema_v3.db``: a database written by the hermes-lcm of schema version 3.

Run it with that version's code on the path (the file is committed; rebuilding it needs the old code):

    git -C REPO archive <v3 commit> | tar -x -C /tmp/v3
    mkdir /tmp/v3/.pyroot && ln -s /tmp/v3 /tmp/v3/.pyroot/hermes_lcm
    PYTHONPATH=/tmp/v3/.pyroot python tests/migration/make_v3_fixture.py tests/migration/fixtures/schema_v3.db

It holds what the schema-4 migration must carry over: two conversations and sessions, host messages
(hex fingerprints) with tool calls, imported messages (``import:`` fingerprints) and one whose
fingerprint is neither form, summaries of both depths with message and summary edges, the context.
"""

from __future__ import annotations

import copy
import sys
import tempfile
from pathlib import Path

from hermes_lcm.base.records import MessageIn
from hermes_lcm.engine import LcmEngine
from hermes_lcm.store import close_all, open_store


def history(turns: int, tag: str) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for t in range(turns):
        call = f"call_{tag}_{t}"
        out += [
            {
                "role": "user",
                "content": f"{tag} question {t}: how do we migrate table {t % 7} safely?",
            },
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": "search_files", "arguments": f'{{"pattern": "t{t}"}}'},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": call,
                "name": "search_files",
                "content": f"{tag} result {t}: " + "rows copied in one transaction " * (3 + t % 5),
            },
            {
                "role": "assistant",
                "content": f"{tag} answer {t}: keep the rowids, check FTS, done.",
            },
        ]
    return out


def main(target: str) -> None:
    home = Path(tempfile.mkdtemp(prefix="lcm-v3-fixture-"))
    env = {
        "HERMES_HOME": str(home),
        "LCM_SUMMARY_PROVIDER": "extractive",
        "LCM_ABSOLUTE_THRESHOLD_TOKENS": "3000",
        "LCM_LEAF_CHUNK_TOKENS": "500",
        "LCM_FRESH_TAIL_COUNT": "6",
        "LCM_CONDENSE_MIN_NODES": "2",
    }
    for session, tag in (("fixture-a", "alpha"), ("fixture-b", "beta")):
        engine = copy.deepcopy(LcmEngine(env=env))
        engine.update_model("fixture-model", 16_000)
        engine.on_session_start(session, hermes_home=str(home), platform="cli")
        core = engine.ensure_core()
        assert core is not None, engine.startup_error
        messages = history(40, tag)
        for stop in range(8, len(messages) + 1, 8):
            core.ingest(messages[:stop], source="cli")
            core.compact(core.budget(engine.threshold_tokens, 500), force=True)
    store = open_store(home / "lcm.db")
    conv = store.ensure_conversation("import:fixture")
    store.upsert_session("imported-session", conv, platform="import")
    records = [
        MessageIn(
            "user",
            f"imported {i}",
            None,
            None,
            None,
            None,
            1700000000.0 + i,
            3,
            "import:" + f"{i:032x}",
        )
        for i in range(5)
    ]
    records.append(
        MessageIn(
            "assistant", "odd fingerprint", None, None, None, None, None, 2, "legacy-Fingerprint"
        )
    )
    store.append_imported(conv, "imported-session", "import", records)
    close_all()
    Path(target).write_bytes((home / "lcm.db").read_bytes())
    print(f"wrote {target}")


if __name__ == "__main__":
    main(sys.argv[1])
