"""Secrets in random forms (tests/secretforms.py), driven through the engine as the host drives it
with redaction on, appear nowhere afterwards: not in any file under HERMES_HOME (database, WAL,
payload files), the backup, the export, the view page, ``lcm messages tail``, the tools' answers,
a log line, nor any request sent to the summary model or the embedding provider.

The summary model is a stub on 127.0.0.1 that echoes its whole request as the summary, so what it
was sent is also what gets stored; the embedding provider is the embeddings stub (tests/embedstub.py)."""

from __future__ import annotations

import copy
import io
import json
import logging
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hermes_lcm.cli import main as cli
from hermes_lcm.engine import LcmEngine
from hermes_lcm.store import close_all

from ..embedstub import Stub, serve
from ..reliability.stub_summarizer import StubSummarizer
from ..secretforms import FORMS, Planted, leaked, plant

PER_FORM = 3
SEED = 20261202


@pytest.fixture
def summarizer() -> Iterator[StubSummarizer]:
    stub = StubSummarizer("echo")
    try:
        yield stub
    finally:
        stub.close()


@pytest.fixture
def embeddings() -> Iterator[Stub]:
    state, stop = serve()
    try:
        yield state
    finally:
        stop()
        close_all()


def planted_items() -> list[Planted]:
    rng = random.Random(SEED)
    return [plant(rng, form) for form in sorted(FORMS) for _ in range(PER_FORM)]


def history_with(items: list[Planted]) -> list[dict[str, Any]]:
    """A host history carrying each item where it belongs: text in user messages, arguments in a
    tool call (answered), results as a tool's output; filler between them so compaction has turns."""
    out: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        out.append(
            {
                "role": "user",
                "content": f"step {i}: " + "please keep going with the deployment. " * 8,
            }
        )
        if item.where == "text":
            out.append({"role": "user", "content": f"here it is: {item.text}"})
            out.append({"role": "assistant", "content": f"noted for step {i}."})
            continue
        arguments = (
            item.text if item.where == "arguments" else json.dumps({"command": "cat settings"})
        )
        result = item.text if item.where == "result" else "done"
        out.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "terminal", "arguments": arguments},
                    }
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": f"call_{i}", "content": result})
        out.append({"role": "assistant", "content": f"step {i} finished."})
    out.append({"role": "user", "content": "thanks, now summarise what we did"})
    return out


def cli_text(db: str, *argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["--db", db, "--format", "json", *argv], out=out, err=err)
    assert code == 0, err.getvalue()
    return out.getvalue() + err.getvalue()


def test_no_secret_in_any_form_reaches_a_file_an_output_a_log_or_a_provider(
    tmp_path: Path, summarizer: StubSummarizer, embeddings: Stub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    home = tmp_path / "home"
    home.mkdir()
    items = planted_items()
    env = {
        "HERMES_HOME": str(home),
        "LCM_SENSITIVE_PATTERNS_ENABLED": "true",
        "LCM_LARGE_OUTPUT_EXTERNALIZATION_ENABLED": "true",
        "LCM_SUMMARY_PROVIDER": "openai",
        "LCM_SUMMARY_MODEL": "echo-model",
        "LCM_SUMMARY_BASE_URL": summarizer.base_url,
        "LCM_SUMMARY_API_KEY": "stub-key-0123456789",
        "LCM_ABSOLUTE_THRESHOLD_TOKENS": "6000",
        "LCM_FRESH_TAIL_COUNT": "4",
        "LCM_LEAF_CHUNK_TOKENS": "1200",
        "LCM_EMBEDDINGS_ENABLED": "true",
        "LCM_EMBEDDING_PROVIDER": "openai",
        "LCM_EMBEDDING_BASE_URL": embeddings.base_url + "/v1",
        "LCM_EMBEDDING_MODEL": "stub-embed",
        "LCM_EMBEDDING_API_KEY": "sk-test-vectors-0123456789",
    }
    engine = copy.deepcopy(LcmEngine(env=env))
    engine.update_model("main-model", 64000)
    engine.on_session_start("forms", hermes_home=str(home), platform="cli")
    history = history_with(items)
    engine.compress(history, current_tokens=40000, force=True)
    core = engine.core
    assert core is not None and core.semantic.embedder is not None
    if core.semantic.job is not None:
        core.semantic.job.stop()
    core.semantic.embedder.backfill()
    answers = [
        engine.handle_tool_call("lcm_grep", {"query": "password token secret"}, messages=history),
        engine.handle_tool_call(
            "lcm_recall", {"query": "which credentials did we use"}, messages=history
        ),
        engine.handle_tool_call("lcm_describe", {}, messages=history),
    ]
    engine.on_session_end("forms", history)
    db = str(engine.database_path())
    shown = {
        "backup": cli_text(db, "backup"),
        "tail": cli_text(db, "messages", "tail", "--conversation", "1", "--limit", "500"),
        "view": cli_text(db, "view", "--output", str(home / "view.html")),
        "answers": "\n".join(answers),
    }
    with (home / "export.jsonl").open("w", encoding="utf-8") as out:
        assert cli.main(["--db", db, "export", "--conversation", "1"], out=out) == 0
    close_all()

    assert summarizer.requests, "the summary model was never asked"
    assert embeddings.requests, "nothing was embedded"
    places = {
        str(p.relative_to(home)): p.read_bytes().decode("utf-8", "replace")
        for p in home.rglob("*")
        if p.is_file() and not p.is_symlink()
    }
    assert (
        "lcm.db" in places
        and "view.html" in places
        and any("pre-" in n or "backup" in n for n in places)
    )
    places.update(shown)
    places["summary requests"] = json.dumps(summarizer.requests, ensure_ascii=False)
    places["embedding requests"] = json.dumps(
        [r for _, r, _ in embeddings.requests], ensure_ascii=False
    )
    places["logs"] = caplog.text
    found = [
        (item.form, secret, where)
        for item in items
        for where, text in places.items()
        for secret in leaked(item, text)
    ]
    assert not found, found
    stored = places["lcm.db"] + places.get("lcm.db-wal", "")
    assert stored.count("[lcm-redacted:") >= len(items), "each planted item left a placeholder"
