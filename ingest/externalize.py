"""Large tool outputs out of the rows (LCM_LARGE_OUTPUT_EXTERNALIZATION_ENABLED): the ingest step
and what the prompt and the host adapter need to know about an externalized output.

A tool result whose text is at least the threshold long is written whole to its payload file
(keyed by the database's secret, outputs.ref_for names it; the payload guard writes it and lists
it as the row's grant, so a symlinked directory, a full disk
and the guard's dry mode behave as for any payload) and its row keeps ``outputs.stub``: the head,
the tail and the ref. What stays inline, always: the tool-call arguments, user and assistant
text, images and other non-text parts, a stub given again, and the text of a file that could
not be written (nothing is lost; the identity still uses the stub, as for payloads).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..base.outputs import is_stub, parse_stub, stub
from ..base.payloads import PayloadGuard
from ..base.records import without_shadows
from ..base.tokens import count_message, count_tokens
from ..prompt.blocks import Item
from ..schemas import tool_names
from .normalize import Draft
from .steps import Normalizer

STEP_NAME = "externalization"
_TEXT_TYPES = ("text", "input_text", "output_text")


class ExternalizeStep:
    """The ingest step (ingest.Step): each large text of a tool result to its file, the stub kept.

    ``write=False`` is the shadow form (ingest.Normalizer.shadow): it only computes the stub, to
    recognise a message stored as one while the step is off now."""

    def __init__(
        self, guard: PayloadGuard, threshold_chars: int, preview_chars: int, write: bool = True
    ) -> None:
        self.guard = guard
        self.threshold = max(1, int(threshold_chars))
        self.preview = max(0, int(preview_chars))
        self.write = write

    def __call__(self, draft: Draft) -> Draft:
        if (
            draft.role != "tool" or draft.tool in tool_names()
        ):  # our answers fit below the threshold (tools.py)
            return draft
        content = draft.content
        if isinstance(content, str):
            text = self.text(content)
            return draft if text is content else replace(draft, content=text)
        if isinstance(content, list):
            parts = [self._part(p) for p in content]
            if all(a is b for a, b in zip(parts, content, strict=True)):
                return draft
            return replace(draft, content=parts)
        return draft

    def _part(self, part: Any) -> Any:
        if not (
            isinstance(part, Mapping)
            and part.get("type") in _TEXT_TYPES
            and isinstance(part.get("text"), str)
        ):
            return part
        text = self.text(part["text"])
        return part if text is part["text"] else {**part, "text": text}

    def text(self, text: str) -> str:
        """``text``, or its stub once its file is written (the very same object when unchanged)."""
        if len(text) < self.threshold or is_stub(text):
            return text
        ref = self.guard.ref_for(text)
        if self.write and not self.guard.keep(ref, text):
            return text  # kept inline: losing the output is worse than a large row
        return clamped_stub(text, ref, self.preview, self.threshold)


def clamped_stub(text: str, ref: str, preview_chars: int, threshold: int) -> str:
    """The stub with its preview cut so the stub stays below ``threshold`` (a stub is never
    externalized again, even by a reader that only compares lengths)."""
    preview = preview_chars
    out = stub(text, ref, preview)
    for _ in range(4):
        if len(out) < threshold or preview == 0:
            break
        preview = max(0, preview - (len(out) - threshold + 1))
        out = stub(text, ref, preview)
    return out


def stub_ref(text: Any) -> str | None:
    """The ref of a stub (None for any other value)."""
    info = parse_stub(text) if isinstance(text, str) else None
    return info.ref if info is not None else None


def content_refs(content: Any) -> list[str]:
    """The refs of the stubs in a message content (a string or its text parts)."""
    if isinstance(content, str):
        ref = stub_ref(content)
        return [ref] if ref else []
    if isinstance(content, list):
        return [r for p in content if isinstance(p, Mapping) and (r := stub_ref(p.get("text")))]
    return []


def restored(content: Any, guard: PayloadGuard) -> Any:
    """``content`` with each stub replaced by its file's whole text; None when a file cannot be read
    (the stub is then what is shown)."""
    try:
        if isinstance(content, str):
            ref = stub_ref(content)
            return content if ref is None else _read_all(guard, ref)
        if isinstance(content, list):
            out = []
            for part in content:
                ref = stub_ref(part.get("text")) if isinstance(part, Mapping) else None
                out.append(part if ref is None else {**part, "text": _read_all(guard, ref)})
            return out
    except (OSError, ValueError):
        return None
    return content


def _read_all(guard: PayloadGuard, ref: str) -> str:
    text, total = guard.read(ref, 0, 1 << 62)
    if len(text) != total:  # pragma: no cover - read returns the whole file for this limit
        raise OSError(f"short read of {ref}")
    return text


Grants = Callable[[Sequence[int]], Mapping[int, set[str]]]


def with_whole_outputs(
    build: Callable[[Sequence[Item]], list[dict[str, Any]]],
    raw: Sequence[Item],
    guard: PayloadGuard,
    grants: Grants,
) -> list[dict[str, Any]]:
    """The prompt ``build`` makes of ``raw``, with each externalized tool result that no assistant
    message after it answers yet shown whole (read back from its file), when that displaces nothing:
    the model must see the output it is about to act on. Answered ones keep their stub.

    Only a stub the engine itself wrote for that row is read back (``grants``: the refs each stored
    row was granted, Store.granted_refs): a tool result that merely prints another owner's stub
    stays the stub. ``build`` keeps the budget either way; the whole form is taken only when the
    prompt it gives holds the same messages as the stub form (the whole outputs included, uncut),
    else the stubs."""
    last_assistant = max((i for i, item in enumerate(raw) if item.role == "assistant"), default=-1)
    due = {
        i: raw[i].store_id
        for i in range(last_assistant + 1, len(raw))
        if raw[i].role == "tool" and content_refs(raw[i].message.get("content"))
    }
    stored = [store_id for store_id in due.values() if store_id is not None]
    granted = grants(stored) if stored else {}
    swaps: dict[int, Item] = {}
    for index, store_id in due.items():
        item = raw[index]
        if store_id is not None and set(content_refs(item.message.get("content"))) <= granted.get(
            store_id, set()
        ):
            whole = restored(item.message.get("content"), guard)
            if whole is not None:
                message = without_shadows({**item.message, "content": whole})
                swaps[index] = Item(
                    item.role, count_message(message), message, item.store_id, item.ref
                )
    stubbed = build(raw)
    if not swaps:
        return stubbed
    widened = build([swaps.get(i, item) for i, item in enumerate(raw)])
    back = {id(swap.message): raw[i].message for i, swap in swaps.items()}
    if len(widened) != len(stubbed) or sum(id(m) in back for m in widened) != len(swaps):
        return stubbed  # a whole output was cut or left out, or displaced another message
    same = all(
        back[id(a)] is b if id(a) in back else (a is b or a == b)
        for a, b in zip(widened, stubbed, strict=True)
    )
    return widened if same else stubbed


def replay_candidates(
    messages: Sequence[Any], threshold_chars: int, threshold_tokens: int
) -> list[Mapping[str, Any]]:
    """The tool results of a host request that are large enough to stub in the host's own list
    (LCM_LARGE_OUTPUT_ACTIVE_REPLAY_STUBBING_ENABLED): a text at least ``threshold_chars`` long (so
    stored as a stub) and the message at least ``threshold_tokens`` tokens. Cheap on a usual
    request: only tool results with a long text are counted."""
    found = []
    for message in messages:
        if not (isinstance(message, Mapping) and message.get("role") == "tool"):
            continue
        texts = _texts(message.get("content"))
        long = [t for t in texts if len(t) >= threshold_chars and not is_stub(t)]
        if long and sum(count_tokens(t) for t in texts) >= threshold_tokens:
            found.append(message)
    return found


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            p["text"]
            for p in content
            if isinstance(p, Mapping)
            and p.get("type") in _TEXT_TYPES
            and isinstance(p.get("text"), str)
        ]
    return []


def stored_as_stub(normalizer: Normalizer, message: Mapping[str, Any]) -> bool:
    """Is ``message`` stored (or, on its next ingest, to be stored) with a stub in place of its text?
    False when the file could not be written (the text stays inline): then the host's list would
    only get the same text back, and asking it to compress again would be a loop."""
    content, parts, _ = normalizer.stored_form(message)
    return bool(content_refs(content) or (parts is not None and "[lcm-output ref=" in parts))


class ActiveReplay:
    """LCM_LARGE_OUTPUT_ACTIVE_REPLAY_STUBBING_ENABLED for the host adapter: the host's
    should_compress gets no messages, so the request before it (pre_api_request) is looked at, and
    its large tool results are the candidates. By the time should_compress runs, the response to
    that request has answered them all, so the compress that follows shows them as their stubs."""

    def __init__(self) -> None:
        self._due: list[Mapping[str, Any]] = []

    def observe(self, messages: Sequence[Any], config: Any) -> None:
        if (
            config.large_output_active_replay_stubbing_enabled
            and config.large_output_externalization_enabled
        ):
            self._due = replay_candidates(
                messages,
                config.large_output_externalization_threshold_chars,
                config.large_output_active_replay_stub_threshold_tokens,
            )

    def due(self, normalizer: Normalizer) -> bool:
        """Is a candidate stored as a stub (so a compress hands the host the stub)? Asked once per
        request: the next request holds the stub, or the same text when its file could not be
        written, and neither asks again (no loop)."""
        due, self._due = self._due, []
        if not due:
            return False
        try:
            return any(stored_as_stub(normalizer, m) for m in due)
        finally:
            normalizer.forget()
