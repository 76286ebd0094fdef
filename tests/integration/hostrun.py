"""A finished host run and what the tests read back from it: the user message of one turn as
each main request carried it (with any block the host appended), and the user rows LCM stored."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from .harness import HostHome
from .stub_llm import StubLLM, text_of


@dataclass
class Run:
    hh: HostHome
    stub: StubLLM

    def turn_requests(self, message: str) -> list[str]:
        """The user message of ``message``'s turn as each main request sent it."""
        out = []
        for req in self.stub.requests_of("main"):
            users = [text_of(m.get("content")) for m in req.messages if m.get("role") == "user"]
            if users and users[-1].startswith(message):
                out.append(users[-1])
        return out

    def user_rows(self) -> list[tuple[str, str | None]]:
        con = sqlite3.connect(f"file:{self.hh.lcm_db}?mode=ro", uri=True)
        try:
            return [
                (c, e)
                for c, e in con.execute("SELECT content, extra FROM messages WHERE role='user'")
            ]
        finally:
            con.close()
