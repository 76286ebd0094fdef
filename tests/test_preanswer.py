"""The pre-answer evidence hook (evidence/need.py, evidence/preanswer.py, hooks.pre_llm_call): the
gate, the sealed brief beside proactive recall's block, one search for both, never stored; on SQLite
and on PostgreSQL (``both_backends``)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from hermes_lcm.base.scaffold import RECALL_MARKER
from hermes_lcm.base.tokens import count_tokens
from hermes_lcm.config import load_config
from hermes_lcm.engine import LcmEngine
from hermes_lcm.evidence.need import needs_recall
from hermes_lcm.evidence.preanswer import INTRO, PreAnswer
from hermes_lcm.host import hooks
from hermes_lcm.search import searcher as search

from .backends import raw_sql

PRE = {"LCM_PREANSWER_EVIDENCE_ENABLED": "true"}
RECALL = {"LCM_PROACTIVE_RECALL_ENABLED": "true"}
FACT = "We decided the kafka consumer lag alert fires when lag exceeds 5000 messages on the billing topic."
QUESTION = "What threshold did we pick for the kafka consumer lag alert on billing?"
HEADER = re.compile(r"\[lcm:recall [0-9a-f]{24}\]")
NOW = time.time()


def seed(make_engine: Callable[..., LcmEngine]) -> None:
    make_engine(session="s1").ingest_host(
        [
            {"role": "user", "content": FACT},
            {"role": "assistant", "content": "Noted: 5000 messages for billing."},
            {"role": "user", "content": "Gina opened her clothing store yesterday."},
            {"role": "assistant", "content": "Congratulations to Gina!"},
        ]
    )


def hook(session: str, message: str) -> str | None:
    answer = hooks.pre_llm_call(session_id=session, user_message=message, conversation_history=[])
    return None if answer is None else answer["context"]


@pytest.mark.parametrize(
    "text",
    [
        "When did Caroline go to the LGBTQ support group?",
        "What did we decide about the lag alert?",
        "Remind me what I told you about my sister.",
        "Where was I last Friday?",
        "Did you say the port was 8731?",
    ],
)
def test_questions_about_the_past_need_recall(text: str) -> None:
    assert needs_recall(text, NOW).recall, text


@pytest.mark.parametrize(
    "text",
    [
        "Write a SQL query that returns the top five customers by revenue last quarter.",
        "How do I undo the last git commit but keep the changes?",
        "What's a good regex for validating IPv4 addresses?",
        "Explain the difference between a mutex and a semaphore.",
        "ok",
        "thanks!",
        "My sister is getting married in June; any toast ideas?",
        "x" * 2000 + "?",
    ],
)
def test_ordinary_requests_do_not(text: str) -> None:
    assert not needs_recall(text, NOW).recall, needs_recall(text, NOW)


def test_a_known_name_is_enough() -> None:
    text = "What is Gina's favorite style of dance?"
    assert not needs_recall(text, NOW).recall
    assert needs_recall(text, NOW, lambda words: [w == "Gina" for w in words]).reasons == (
        "known name",
    )


@pytest.mark.both_backends
def test_off_by_default_and_the_mode_off(make_engine: Callable[..., LcmEngine]) -> None:
    seed(make_engine)
    off = make_engine(session="s2")
    assert hook("s2", QUESTION) is None
    mode_off = make_engine(session="s3", **PRE, LCM_PREANSWER_EVIDENCE_MODE="off")
    assert hook("s3", QUESTION) is None
    assert off.core is not None and mode_off.core is not None


@pytest.mark.both_backends
def test_the_brief_carries_the_cited_line(make_engine: Callable[..., LcmEngine]) -> None:
    seed(make_engine)
    engine = make_engine(session="s2", **PRE)
    brief = hook("s2", QUESTION)
    assert brief is not None and HEADER.match(brief) and "[/lcm:recall " in brief.splitlines()[-1]
    assert INTRO in brief and FACT in brief and re.search(r"store_id=\d+ · \d{4}-\d\d-\d\dT", brief)
    assert count_tokens(brief) <= 600
    assert hook("s2", "Explain the difference between a mutex and a semaphore.") is None
    dated = hook("s2", "When did Gina open her clothing store?")
    assert dated is not None and re.search(
        r'"yesterday" = the day before (\d{4}-\d\d-\d\d), \d{4}-\d\d-\d\d', dated
    )  # the speaker's words put on the calendar, then the day they mean
    assert engine.core is not None


@pytest.mark.both_backends
def test_both_blocks_one_search_and_never_stored(
    make_engine: Callable[..., LcmEngine], monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(make_engine)
    engine = make_engine(session="s2", **PRE, **RECALL)
    pages = []
    real = search.Searcher.page
    monkeypatch.setattr(
        search.Searcher, "page", lambda self, *a, **k: pages.append(1) or real(self, *a, **k)
    )
    context = hook("s2", QUESTION)
    assert (
        context is not None and len(HEADER.findall(context)) == 2
    )  # proactive's block, then the brief
    assert len(pages) == 1  # the brief took its candidates from proactive recall's search
    recall_block, brief = context.split("\n\n", 1)
    assert "Recalled from earlier conversations" in recall_block and INTRO in brief
    shown = set(re.findall(r"store_id=(\d+)", recall_block))
    assert not shown & set(re.findall(r"store_id=(\d+)", brief))  # no line twice
    sent = {"role": "user", "content": QUESTION, "api_content": QUESTION + "\n\n" + context}
    engine.ingest_host([sent, {"role": "assistant", "content": "5000 messages."}])
    assert engine.core is not None
    rows = raw_sql(engine.core.store.path, "SELECT content, extra FROM messages WHERE role='user'")
    assert (QUESTION, None) in rows
    assert all(RECALL_MARKER not in c and RECALL_MARKER not in (e or "") for c, e in rows)


@pytest.mark.both_backends
def test_a_failing_brief_leaves_proactive_recalls_block(
    make_engine: Callable[..., LcmEngine], monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(make_engine)
    engine = make_engine(session="s2", **PRE, **RECALL)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(PreAnswer, "brief", broken)
    context = hook("s2", QUESTION)
    assert context is not None and len(HEADER.findall(context)) == 1 and "Recalled from" in context
    assert engine.core is not None


def test_settings() -> None:
    loaded = load_config(
        {"LCM_PREANSWER_EVIDENCE_ENABLED": "true", "LCM_PREANSWER_EVIDENCE_MODE": "requirements_v1"}
    )
    assert (
        loaded.config.preanswer_evidence_enabled
        and loaded.config.preanswer_evidence_mode == "requirements_v1"
    )
    assert not loaded.problems
    bad = load_config({"LCM_PREANSWER_EVIDENCE_MODE": "always"})
    assert bad.config.preanswer_evidence_mode == "" and any(
        "PREANSWER_EVIDENCE_MODE" in p for p in bad.problems
    )
