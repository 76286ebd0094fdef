"""The evidence family's services: exact refs read within the caller's reach, bounded packs of
the cited lines, claims checked against them, and deterministic computations over them.

Callers import from here (the front door); the modules behind it may move.
"""

from __future__ import annotations

from .assertions import AssertionJob, Assertions
from .compile import check_claim, compile_brief, read_claims
from .compute import OPERATIONS, compute
from .pack import DEFAULT_BUDGET, Pack, build_pack, sufficiency
from .refs import Line, Missing, Ref, RefError, hydrate, hydrate_all, parse_ref, parse_refs, read_refs

__all__ = [
           "DEFAULT_BUDGET",
           "OPERATIONS",
           "AssertionJob",
           "Assertions",
           "Line",
           "Missing",
           "Pack",
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
           "read_claims",
           "read_refs",
           "sufficiency",
]
