"""Per-turn overhead with redaction and five ignore patterns, against the same engine without them.

One command: ``.venv/bin/python bench/privacy_overhead.py [--sizes 1000,100000] [--turns 200]``.

Each conversation is grown once (bench/steady_state.build) and copied; one copy is run by an engine
with ``LCM_SENSITIVE_PATTERNS_ENABLED`` and five ``LCM_IGNORE_MESSAGE_PATTERNS``, the other by the
default engine, the same host turns in the same process, interleaved turn by turn (each engine
goes first every other turn) so machine drift hits both alike (steady_state.HostTurns: ingest from
the host's list, should_compress, one assembly; the CLI and the API shapes). Every tenth new message
carries a secret, so the redactor replaces as well as scans. The target (SPEC.md): the
privacy engine costs at most 1.5x the default one.
"""

from __future__ import annotations

import argparse
from typing import Any

from common import History, core_of, print_table, save_result
from steady_state import HostTurns, copies, pair_rows, play_pair

from hermes_lcm.handlers.status import core_privacy

TARGET_RATIO = 1.5
IGNORE = ",".join(
    [
        "^HEARTBEAT_OK$",
        "^Cronjob Response:",
        "^>>>Cronjob Response<<<:",
        '"kind": "heartbeat"',
        r"(?i)^\s*ping\s*$",
    ]
)
PRIVACY_ENV = {"LCM_SENSITIVE_PATTERNS_ENABLED": "true", "LCM_IGNORE_MESSAGE_PATTERNS": IGNORE}
SECRETS = [
    "api_key=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w",
    "password=hunter2",
    "AKIAIOSFODNN7EXAMPLE",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_X",
]


class SecretHistory(History):
    """The benchmark history with a secret in every tenth message."""

    def messages(self, lo: int, hi: int) -> list[dict[str, Any]]:
        out = super().messages(lo, hi)
        for offset, message in enumerate(out):
            if (lo + offset) % 10 == 0 and isinstance(message.get("content"), str):
                message["content"] = (
                    f"{message['content']} {SECRETS[(lo + offset) // 10 % len(SECRETS)]}"
                )
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    history = SecretHistory(args.seed)
    results: dict[str, Any] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        pair, seconds = copies(size, history, {"base": {}, "privacy": PRIVACY_ENV}, "privacy")
        entry: dict[str, Any] = {"build_seconds": round(seconds, 1)}
        for shape in ("cli", "api"):
            start = size if shape == "cli" else size + 4 * 220
            players = {
                name: HostTurns(*pair[name], history, start, shape) for name in ("base", "privacy")
            }
            print(f"{size:>7} msgs", end=" ")
            play_pair(entry, shape, players, args.turns)
        redaction = core_privacy(core_of(pair["privacy"][0]))["redaction"]
        entry["redacted"] = redaction["redacted_this_process"]
        assert sum(entry["redacted"].values()) > 0, (
            "the privacy engine redacted nothing: the run proves nothing"
        )
        results[str(size)] = entry
    rows = pair_rows(
        results,
        ("base", "privacy"),
        "per-turn overhead with redaction + 5 ignore patterns",
        TARGET_RATIO,
        "LCM-X: 39 ms/turn at 4k messages, 111 ms with one ignore regex",
    )
    print_table(rows)
    save_result(
        "privacy_overhead", rows, {"sizes": results, "turns": args.turns, "ignore_patterns": IGNORE}
    )


if __name__ == "__main__":
    main()
