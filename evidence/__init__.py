"""The evidence family's services: exact refs read within the caller's reach, bounded packs of
the cited lines, claims checked against them, and deterministic computations over them.

Callers import from here (the front door); the modules behind it may move.
"""

from __future__ import annotations

from .assertions import KINDS, AssertionJob, Assertions
from .compile import check_claim, compile_brief, read_claims
from .compute import OPERATIONS, compute
from .limits import MAX_QUESTION_CHARS
from .pack import DEFAULT_BUDGET, Pack, build_pack, sufficiency
from .preanswer import PreAnswer
from .preanswer import active as preanswer_active
from .refs import (
    Line,
    Missing,
    Ref,
    RefError,
    hydrate,
    hydrate_all,
    parse_ref,
    parse_refs,
    read_refs,
)
from .retrieve import PACK_TOKENS, retrieve

__all__ = [
    "DEFAULT_BUDGET",
    "KINDS",
    "MAX_QUESTION_CHARS",
    "OPERATIONS",
    "PACK_TOKENS",
    "AssertionJob",
    "Assertions",
    "Line",
    "Missing",
    "Pack",
    "PreAnswer",
    "Ref",
    "RefError",
    "build_pack",
    "check_claim",
    "compile_brief",
    "compute",
    "hydrate",
    "hydrate_all",
    "parse_ref",
    "parse_refs",
    "preanswer_active",
    "read_claims",
    "read_refs",
    "retrieve",
    "sufficiency",
]
