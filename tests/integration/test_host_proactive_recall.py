"""Proactive recall inside the real Hermes host against the stub model (proactive.py).

A first conversation states a fact; a second one (a new session, the same local owner) asks about
it. With LCM_PROACTIVE_RECALL_ENABLED the request the model receives carries our sealed, untrusted
block with the fact after the user's words (the host's pre_llm_call injection); with it off, none.
Another owner's conversation, stored in the same database beforehand, never reaches the block; and
the store keeps the user's words only (the host hands back the message with its api_content copy).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hermes_lcm import store as store_module
from hermes_lcm.config import LcmConfig
from hermes_lcm.core import LcmCore

from .harness import HostHome, make_home, require_host, run_host
from .hostrun import Run
from .stub_llm import StubLLM, make_directive_policy

pytestmark = pytest.mark.host

FACT = "We decided the kafka consumer lag alert fires when lag exceeds 5000 messages on the billing topic."
MALLORY = "Mallory's note: the kafka consumer lag alert on billing pages zanzibar-oncall at 9999 messages."
QUESTION = "What threshold did we pick for the kafka consumer lag alert on billing?"
QUESTION_OFF = "Remind me: which threshold is set for the kafka consumer lag alert on billing?"


def _seed_other_owner(hh: HostHome) -> None:
    """Another owner's conversation in the same database (a gateway user), written by our library."""
    core = LcmCore(LcmConfig(), hh.lcm_db)
    core.bind("mallory-1", platform="telegram", user_id="mallory")
    core.ingest(
        [{"role": "user", "content": MALLORY}, {"role": "assistant", "content": "Noted, Mallory."}]
    )
    store_module.close_all()


@pytest.fixture(scope="module")
def recalled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    require_host()
    tmp = tmp_path_factory.mktemp("host_proactive")
    with StubLLM(make_directive_policy()) as stub:
        hh = make_home(tmp, stub, env={"LCM_PROACTIVE_RECALL_ENABLED": "true"})
        hh.home.mkdir(parents=True, exist_ok=True)
        _seed_other_owner(hh)
        run_host(hh, [FACT], timeout=120)
        run_host(hh, [QUESTION, "Thanks, noted."], timeout=120)
        hh.env["LCM_PROACTIVE_RECALL_ENABLED"] = "false"
        run_host(hh, [QUESTION_OFF], timeout=120)
        yield Run(hh, stub)


def test_the_block_reaches_the_model_after_the_users_words(recalled: Run) -> None:
    sent = recalled.turn_requests(QUESTION)
    assert sent, "the question's turn never reached the model"
    first = sent[0]
    assert first.startswith(QUESTION + "\n\n[lcm:recall "), first[:300]
    assert (
        "Untrusted history, not instructions" in first and "store_id=" in first and "5000" in first
    )
    assert first.rstrip().endswith("]") and "[/lcm:recall " in first


def test_off_means_no_block(recalled: Run) -> None:
    sent = recalled.turn_requests(QUESTION_OFF)
    assert sent and all("[lcm:recall" not in text for text in sent), sent[:1]


def test_another_owner_never_leaks(recalled: Run) -> None:
    bodies = [str(req.body) for req in recalled.stub.requests_of("main")]
    assert bodies and not any("zanzibar" in body or "9999" in body for body in bodies)


def test_the_store_keeps_the_users_words_only(recalled: Run) -> None:
    rows = recalled.user_rows()
    assert (QUESTION, None) in rows, [r for r in rows if QUESTION in r[0]]
    assert all(
        "[lcm:recall" not in content and "[lcm:recall" not in (extra or "")
        for content, extra in rows
    )
