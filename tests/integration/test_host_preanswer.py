"""The pre-answer evidence brief inside the real Hermes host against the stub model.

A first conversation states a fact; a second one (a new session, the same local owner) asks about
it. With LCM_PREANSWER_EVIDENCE_ENABLED (and proactive recall on too) the request the model
receives carries, after the user's words, proactive recall's block and our sealed evidence brief
with the exact cited line; an ordinary request gets no brief; the store keeps the user's words
only (the host hands the message back with its api_content copy).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hermes_lcm.evidence.preanswer import INTRO

from .harness import make_home, require_host, run_host
from .hostrun import Run
from .stub_llm import StubLLM, make_directive_policy

pytestmark = pytest.mark.host

FACT = "We decided the kafka consumer lag alert fires when lag exceeds 5000 messages on the billing topic."
QUESTION = "What threshold did we pick for the kafka consumer lag alert on billing?"
ORDINARY = "Explain the difference between a mutex and a semaphore."


@pytest.fixture(scope="module")
def briefed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    require_host()
    tmp = tmp_path_factory.mktemp("host_preanswer")
    with StubLLM(make_directive_policy()) as stub:
        hh = make_home(
            tmp,
            stub,
            env={"LCM_PREANSWER_EVIDENCE_ENABLED": "true", "LCM_PROACTIVE_RECALL_ENABLED": "true"},
        )
        run_host(hh, [FACT], timeout=120)
        run_host(hh, [QUESTION, ORDINARY], timeout=120)
        yield Run(hh, stub)


def test_the_request_carries_the_brief(briefed: Run) -> None:
    sent = briefed.turn_requests(QUESTION)
    assert sent, "the question's turn never reached the model"
    first = sent[0]
    assert first.startswith(QUESTION + "\n\n[lcm:recall "), first[:300]
    assert INTRO in first and "store_id=" in first and "5000" in first
    assert first.count("[/lcm:recall ") >= 1 and first.rstrip().endswith("]")


def test_an_ordinary_request_gets_no_brief(briefed: Run) -> None:
    sent = briefed.turn_requests(ORDINARY)
    assert sent and all(INTRO not in text for text in sent), sent[:1]


def test_the_store_does_not_hold_the_brief(briefed: Run) -> None:
    rows = briefed.user_rows()
    assert (QUESTION, None) in rows, [r for r in rows if QUESTION in r[0]]
    assert all(
        "[lcm:recall" not in content
        and "[lcm:recall" not in (extra or "")
        and INTRO not in (extra or "")
        for content, extra in rows
    )
