"""A host killed at any step of a turn resumes with the turns it acknowledged: every message stored once.

After a kill the store can be ahead of the host's list (the killed process stored part
of a turn the host never acknowledged). With short replies ("ok", "done") and tool calls that
reuse ``call_0``, alignment anchored on the wrong copy and stored the last acknowledged turn's
reply and tool results again. The host here (``crashplay``) is killed deterministically after a
chosen step: after the user message is stored, after a tool round, inside compaction (its first or
second summarizer call), after compress, after the final reply (before the host persisted the
turn) and after the host persisted it. The check is exact: the stored rows are the transcript.

The randomized long version runs ``LCM_CRASH_SEEDS`` seeds (default 3) of ``LCM_CRASH_TURNS``
turns (default 300) with ``LCM_CRASH_KILLS`` kills (default 24); ``python -m
tests.reliability.crash_seeds`` runs many seeds and reports duplicates and losses.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .crashplay import (
    CALL_IDS,
    REPLIES,
    RESULTS,
    STEPS,
    USER_SHORT,
    Host,
    Turn,
    differences,
    flat,
    play,
    random_kills,
    row,
    stored_rows,
    tool_round,
    transcript,
)

SEEDS = int(os.environ.get("LCM_CRASH_SEEDS", "3"))
TURNS = int(os.environ.get("LCM_CRASH_TURNS", "300"))
KILLS = int(os.environ.get("LCM_CRASH_KILLS", "24"))


@pytest.mark.parametrize("shape", ["api", "cli"])
@pytest.mark.parametrize("step", STEPS)
def test_a_kill_after_any_step_stores_every_message_once(
    tmp_path: Path, step: str, shape: str
) -> None:
    turns = transcript(19, 40)
    kills = {t: step for t in range(2, 40, 3)}
    errors = play(tmp_path, turns, kills, shape=shape)
    assert errors == []
    assert differences(tmp_path / "lcm.db", turns) == (0, 0, "")


def test_the_issue_19_shape_tool_result_and_reply_of_the_last_acked_turn(tmp_path: Path) -> None:
    """The reported case: the killed process stored the next turn's user message and its tool
    round (a result reusing call_0 with the same short text as the acknowledged turn's)."""
    call, result = tool_round("call_0", "ok", "ls")
    ok = {"role": "assistant", "content": "ok"}
    turns = [
        Turn({"role": "user", "content": text}, ((call, result),), ok)
        for text in ("please look at src/a.py and fix it", "continue", "go on")
    ]
    for kill in ("user", "tool", "reply"):
        home = tmp_path / kill
        assert play(home, turns, {1: kill, 2: kill}) == []
        assert differences(home / "lcm.db", turns) == (0, 0, "")


@pytest.mark.parametrize("seed", range(SEEDS))
def test_long_random_session_with_kills_stores_every_message_once(
    tmp_path: Path, seed: int
) -> None:
    turns = transcript(seed, TURNS)
    kills = random_kills(seed, TURNS, KILLS)
    shape = "cli" if seed % 2 else "api"
    errors = play(tmp_path, turns, kills, shape=shape)
    extra, missing, where = differences(tmp_path / "lcm.db", turns)
    assert errors == []
    assert (extra, missing) == (0, 0), (
        f"seed {seed} ({shape}, {len(kills)} kills): {extra} duplicated, {missing} lost; {where}"
    )


def test_a_short_reply_that_really_repeats_is_stored_every_time(tmp_path: Path) -> None:
    """The same "ok" from the user in every turn, the same reply: a row each, also across kills.

    Not every kill point: when nothing but "ok"/"ok" is stored and the store is a turn ahead of
    the host, the host's list matches the store equally well one turn later (content alone
    cannot tell); real histories have a message the conversation holds once within the
    compared tail, which settles it (the other tests here draw one at least every 6 turns).
    """
    turns = [
        Turn({"role": "user", "content": "ok"}, (), {"role": "assistant", "content": "ok"})
        for _ in range(8)
    ]
    assert play(tmp_path, turns, {2: "user", 3: "compaction", 4: "persist", 6: "compact"}) == []
    assert differences(tmp_path / "lcm.db", turns) == (0, 0, "")


short_text = st.sampled_from(USER_SHORT)


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[Turn], dict[int, str], str]:
    count = draw(st.integers(3, 14))
    turns = []
    for t in range(count):
        unique = t % 6 == 0 or draw(st.booleans())
        user = f"please fix the bug in src/m{t}.py" if unique else draw(short_text)
        rounds = []
        for _ in range(draw(st.integers(0, 2))):
            call, result = tool_round(
                draw(st.sampled_from(CALL_IDS)),
                draw(st.sampled_from(RESULTS)),
                draw(st.sampled_from(["ls", "make"])),
            )
            rounds.append((call, result))
        turns.append(
            Turn(
                {"role": "user", "content": user},
                tuple(rounds),
                {"role": "assistant", "content": draw(st.sampled_from(REPLIES))},
            )
        )
    # From turn 1: a host killed before it persisted its first turn has no session to resume.
    kills = draw(st.dictionaries(st.integers(1, count - 1), st.sampled_from(STEPS), max_size=count))
    return turns, kills, draw(st.sampled_from(["api", "cli"]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_property_random_conversations_and_kills_store_every_message_once(
    case: tuple[list[Turn], dict[int, str], str],
) -> None:
    turns, kills, shape = case
    with tempfile.TemporaryDirectory() as home:
        errors = play(Path(home), turns, kills, shape=shape)
        assert errors == []
        assert differences(Path(home) / "lcm.db", turns) == (0, 0, "")


def test_a_gateway_rebuilding_its_list_each_call_stores_repetitive_content_once(
    tmp_path: Path,
) -> None:
    """Fresh dicts every call (the API server reloads its history): no shortcut may take another
    list of the same length ending in another "ok" for the one seen before."""
    messages = flat(transcript(5, 120))
    host = Host(tmp_path, "gateway")
    core = host.engine.ensure_core()
    assert core is not None
    for lo in range(
        0, 400, 100
    ):  # batches overlapping the stored tail by 8, as the bulk paths send
        core.ingest(json.loads(json.dumps(messages[max(0, lo - 8) : lo + 100])))
    for n in range(400, 430):
        host.ingest(json.loads(json.dumps(messages[:n])))
        host.ingest(json.loads(json.dumps(messages[:n])))
    host.ingest(
        json.loads(json.dumps(messages[100:300]))
    )  # an old slice re-sent: nothing in it is new
    host.close()
    assert host.errors == []
    assert stored_rows(tmp_path / "lcm.db") == [row(m) for m in messages[:429]]
