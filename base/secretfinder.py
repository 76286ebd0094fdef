"""Where the secrets of a text are: spans from every reader of the text, merged into one list.

The redactor (sensitive.py) decides what replaces a secret; this module only finds them, on the
text as it came, so that one reader's replacement can never hide what another reader would find.
Splitting finding from replacing also lets a dry run and the split-token check (a token cut over
two JSON strings) ask "is there a secret here?" without producing any placeholder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from . import secretscan
from .secretkinds import BY_NAME, Kind, tells_in


class Unscanned(Exception):
    """A pattern ran out of time on a text: the kind is named, the text must not be stored."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


@dataclass(frozen=True)
class Found:
    """One secret: its span in the text scanned and the kind that found it."""

    start: int
    end: int
    kind: Kind


class Finder:
    """Every secret of a set of kinds in a text, as spans of that very text.

    The catalog's patterns, the assignment scan, the structure of a JSON text, the text with hidden
    characters folded away, and base64 runs read decoded all contribute spans; overlapping ones
    merge (the kind that comes first in the policy names the whole). Spans are found on the text as
    it came, so nothing found first can hide what another reader would find."""

    def __init__(self, kinds: tuple[Kind, ...]) -> None:
        self.kinds = kinds
        self.patterns = tuple(kind for kind in kinds if not kind.scan)
        self.families = frozenset(kind.name for kind in kinds if kind.scan)
        self.rank = {kind.name: i for i, kind in enumerate(kinds)}

    def find(self, text: str, *, strict: bool, depth: int = 0) -> list[Found]:
        """The merged secrets of ``text``. ``strict``: a pattern out of time raises
        :class:`Unscanned` (else that kind is skipped). ``depth``: how far inside a decoded or
        folded reading this is (one level only: a decoded text is not decoded again)."""
        lowered = text.lower()
        found = self._patterns(text, lowered, strict)
        found += [
            Found(s, e, BY_NAME[f])
            for s, e, f in secretscan.assignments(text, lowered, self.families)
        ]
        if depth == 0:
            found += self._structured(text, lowered)
            shadow = secretscan.Shadow.of(text)
            if shadow is not None:
                for item in self.find(shadow.text, strict=strict, depth=1):
                    start, end = shadow.original(item.start, item.end)
                    found.append(Found(start, end, item.kind))
            if len(text) >= 16:
                for start, end, decoded in secretscan.base64_runs(text):
                    inner = self.find(decoded, strict=strict, depth=1)
                    if inner:
                        found.append(
                            Found(start, end, min((f.kind for f in inner), key=self._order))
                        )
        return self._merged(text, found)

    def _order(self, kind: Kind) -> int:
        return self.rank.get(kind.name, len(self.rank))

    def _patterns(self, text: str, lowered: str, strict: bool) -> list[Found]:
        present = tells_in(lowered)
        found: list[Found] = []
        for kind in self.patterns:
            if not kind.worth_running(lowered, present):
                continue
            try:
                matches = list(kind.pattern.finditer(text, timeout=kind.timeout(len(text))))
            except TimeoutError:
                if strict:
                    raise Unscanned(kind.name) from None
                continue
            for match in matches:
                start, end = kind.secret_span(match)
                if start < end:
                    found.append(Found(start, end, kind))
        return found

    def _structured(self, text: str, lowered: str) -> list[Found]:
        """Values only a JSON text's structure marks (``{"name": "DB_PASSWORD", "value": ...}``,
        ``["--password", ...]``), located in the text by their JSON spelling."""
        if (
            not self.families
            or text.lstrip()[:1] not in ("{", "[")
            or ('"value"' not in lowered and '"--' not in lowered)
        ):
            return []
        try:
            parsed = json.loads(text)
        except ValueError:
            return []
        found = []
        for secret, family in set(secretscan.structured_values(parsed, self.families)):
            spelled = json.dumps(secret, ensure_ascii=False)[1:-1]
            at = text.find(spelled)
            while at >= 0 and spelled:
                found.append(Found(at, at + len(spelled), BY_NAME[family]))
                at = text.find(spelled, at + len(spelled))
        return found

    def _merged(self, text: str, found: list[Found]) -> list[Found]:
        """Overlapping spans as one, none that touches a placeholder already in the text (so the
        redactor is a fixed point: a user pattern may match a placeholder's own letters)."""
        if not found:
            return found
        masked = _placeholder_spans(text)
        merged: list[Found] = []
        for item in sorted(found, key=lambda f: (f.start, -f.end)):
            if any(s < item.end and item.start < e for s, e in masked):
                continue
            if merged and item.start < merged[-1].end:
                last = merged[-1]
                kind = min((last.kind, item.kind), key=self._order)
                merged[-1] = Found(last.start, max(last.end, item.end), kind)
            else:
                merged.append(item)
        return merged


def _placeholder_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    start = text.find(secretscan.PREFIX)
    while start >= 0:
        end = text.find("]", start)
        end = len(text) if end < 0 else end + 1
        spans.append((start, end))
        start = text.find(secretscan.PREFIX, end)
    return spans
