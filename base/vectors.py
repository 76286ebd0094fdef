"""Embedding vectors in memory: preparing, packing for storage, and nearest-neighbour search.

Base layer, numpy only: the storage (``storage/vectors.py``) keeps the bytes this module makes,
and the search arm builds a :class:`VectorIndex` from what the store loads.

Why these choices:

* Every vector is L2-normalized, so cosine similarity is a dot product.
* ``int8`` keeps a quarter of float32's bytes. Quantization is symmetric with one scale per
  vector (``max |x| / 127``): a unit vector's components are small and uneven across vectors,
  so a shared scale would waste most of the 8 bits on the few large ones.
* Matryoshka models put the most information in the first components; truncating them
  (``store_dim``) and renormalizing trades a little recall for proportionally fewer bytes.
* The search is two-stage. The sign of each component (one bit, 48 bytes at dim 384) ranks the
  whole index by Hamming distance at memory speed; only ``multiplier * k`` candidates (at least
  ``MIN_SHORTLIST``) are then scored exactly. Sentence embeddings share a common direction (they
  are anisotropic), so the signs are taken after subtracting the index's mean: raw signs would
  be nearly the same for every vector and rank poorly. Distances between unit vectors do not change under the shift,
  so the centered angle still orders neighbours like the cosine.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np

DTYPES = ("float32", "int8")
MIN_SHORTLIST = 160
_BLOCK = 1024  # rows per build step: a few MB of temporaries at dim 384, whatever the size
_INT8_MAX = 127.0
_SCAN = 16_384  # rows per step of the sign prescreen: 786 kB of XOR scratch at dim 384
_ZERO_NORM = 1e-30  # a row this short is noise, not a direction: it is kept as a zero row


class VectorError(ValueError):
    """A vector that cannot be stored or searched: NaN/inf, wrong shape, unknown dtype."""


def _check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise VectorError(f"unknown vector dtype {dtype!r}; one of {', '.join(DTYPES)}")


def _finite(matrix: np.ndarray) -> None:
    if not np.all(np.isfinite(matrix)):
        raise VectorError("vector holds NaN or infinity")


def _normalized_block(block: np.ndarray) -> np.ndarray:
    """Rows checked for NaN/inf and scaled to unit length, the norms without a squared copy; a
    zero row stays zero (it matches nothing rather than everything)."""
    _finite(block)
    norms = np.sqrt(np.einsum("ij,ij->i", block, block, dtype=np.float64))  # float32 squares of a
    zero = norms <= _ZERO_NORM  # tiny component underflow to a zero norm
    unit = (block / np.where(zero, 1.0, norms)[:, None]).astype(np.float32)
    unit[zero] = 0.0
    return unit


def prepared(matrix: np.ndarray, dtype: str, store_dim: int) -> np.ndarray:
    """The provider's rows as they are stored: float32, cut to ``store_dim`` components
    (Matryoshka; 0 keeps them all) and renormalized, since a cut vector is no longer unit length.

    ``dtype`` is checked here so a bad setting fails before anything is written."""
    _check_dtype(dtype)
    rows = np.atleast_2d(np.asarray(matrix, dtype=np.float32))
    if rows.ndim != 2:
        raise VectorError(f"expected a matrix of vectors, got shape {rows.shape}")
    _finite(rows)  # the components a cut drops too: a NaN anywhere means a broken provider
    if store_dim < 0:
        raise VectorError("store_dim must be 0 (full) or positive")
    if store_dim and store_dim < rows.shape[1]:
        rows = rows[:, :store_dim]
    return _normalized_block(rows)


def encode(row: np.ndarray, dtype: str) -> tuple[bytes, float]:
    """One vector as ``(blob, scale)``: float32 little-endian bytes with scale 1.0, or int8 codes
    with the per-vector scale that maps 127 back to the largest component."""
    _check_dtype(dtype)
    vec = np.asarray(row, dtype=np.float32).reshape(-1)
    _finite(vec)
    if dtype == "float32":
        return vec.astype("<f4").tobytes(), 1.0
    peak = float(np.max(np.abs(vec))) if vec.size else 0.0
    scale = float(np.float32(peak / _INT8_MAX))  # as float32 divides by it: never a zero there
    if not scale > 0:  # all zero, or a peak so small its step underflows: the codes are zeros
        scale = 1.0
    codes = np.clip(np.rint(vec / scale), -_INT8_MAX, _INT8_MAX).astype(np.int8)
    return codes.tobytes(), scale


def decode(blobs: Sequence[bytes], scales: Sequence[float], dim: int, dtype: str) -> np.ndarray:
    """Stored vectors back as one float32 ``(n, dim)`` matrix (int8 codes times their scale).

    A blob of the wrong length is an error, not a silent truncation: it means the model
    or its dimension changed under the same id."""
    _check_dtype(dtype)
    if len(blobs) != len(scales):
        raise VectorError("blobs and scales differ in length")
    width = dim * (4 if dtype == "float32" else 1)
    if any(len(b) != width for b in blobs):
        raise VectorError(f"stored vector is not {dim} x {dtype}")
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    raw = b"".join(blobs)
    if dtype == "float32":
        return np.frombuffer(raw, dtype="<f4").reshape(len(blobs), dim).astype(np.float32)
    codes = np.frombuffer(raw, dtype=np.int8).reshape(len(blobs), dim)
    return codes.astype(np.float32) * np.asarray(scales, dtype=np.float32)[:, None]


def _hamming(bits: np.ndarray, qbits: np.ndarray) -> np.ndarray:
    """Bits differing between each row's signs and the query's, ``_SCAN`` rows at a time: the
    XOR of the whole index (4.8 MB at 100k) per query would be churned through the heap on every
    search, and the allocator keeps such freed pages resident."""
    distance = np.empty(bits.shape[0], dtype=np.int32)
    scratch = np.empty((min(_SCAN, bits.shape[0]), bits.shape[1]), dtype=np.uint64)
    for start in range(0, bits.shape[0], _SCAN):
        part = bits[start : start + _SCAN]
        xor = np.bitwise_xor(part, qbits, out=scratch[: part.shape[0]])
        np.bitwise_count(xor).sum(
            axis=1, dtype=np.int32, out=distance[start : start + part.shape[0]]
        )
    return distance


class VectorIndex:
    """Top-k cosine search over a fixed set of vectors.

    ``dtype`` is how the rows are kept in memory: ``float32`` as given, ``int8`` as codes plus
    a scale per row (a quarter of the memory; the rescore uses the dequantized rows, which is
    exactly what the store holds for an int8 model). Rows are normalized here, so the scores
    are cosines whatever the caller passed.
    """

    def __init__(self, ids: np.ndarray, matrix: np.ndarray, dtype: str) -> None:
        _check_dtype(dtype)
        source = np.atleast_2d(np.asarray(matrix, dtype=np.float32))
        self.ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if source.shape[0] != self.ids.shape[0] or (source.size == 0 and source.shape[0] != 0):
            raise VectorError(f"{self.ids.shape[0]} ids for {source.shape[0]} vectors")
        count = int(source.shape[0])
        self.dim = int(source.shape[1]) if source.ndim == 2 else 0
        self.dtype = dtype
        self._scales: np.ndarray | None = None
        self._rows: np.ndarray
        # Built in blocks of _BLOCK rows: the caller's matrix plus the index's own arrays are the
        # whole cost; a block of temporaries (a few MB) is all that comes and goes. Whole-matrix
        # steps would hold a normalized copy, a centered copy and a boolean mask at once.
        if dtype == "int8":
            self._rows = np.empty((count, self.dim), dtype=np.int8)
            self._scales = np.empty(count, dtype=np.float32)
        else:
            self._rows = np.empty((count, self.dim), dtype=np.float32)
        total = np.zeros(self.dim, dtype=np.float64)
        for start in range(0, count, _BLOCK):
            unit = _normalized_block(source[start : start + _BLOCK])
            total += unit.sum(axis=0, dtype=np.float64)
            self._keep(start, unit)
        self._mean = (
            (total / count).astype(np.float32) if count else np.zeros(self.dim, dtype=np.float32)
        )
        width = -(-self.dim // 64) * 8  # sign bytes per row, padded to whole uint64 words
        packed = np.zeros((count, width), dtype=np.uint8)
        for start in range(0, count, _BLOCK):
            unit = (
                self._rows[start : start + _BLOCK]
                if self._scales is None
                else _normalized_block(source[start : start + _BLOCK])
            )  # the signs of the exact rows
            packed[start : start + unit.shape[0], : -(-self.dim // 8)] = np.packbits(
                (unit - self._mean) > 0, axis=-1
            )
        self._bits = packed.view(np.uint64)
        self._position = (
            {int(i): n for n, i in enumerate(self.ids)} if len(self.ids) < 4096 else None
        )

    def _keep(self, start: int, unit: np.ndarray) -> None:
        """One block of unit rows into the index's arrays: as they are, or as int8 codes and scales."""
        stop = start + unit.shape[0]
        if self._scales is None:
            self._rows[start:stop] = unit
            return
        scales = (
            (np.max(np.abs(unit), axis=1) / _INT8_MAX).astype(np.float32)
            if unit.size
            else np.ones(unit.shape[0], dtype=np.float32)
        )
        scales[~(scales > 0)] = 1.0
        self._rows[start:stop] = np.clip(np.rint(unit / scales[:, None]), -_INT8_MAX, _INT8_MAX)
        self._scales[start:stop] = scales

    def extended(self, ids: np.ndarray, matrix: np.ndarray) -> VectorIndex:
        """This index plus more rows, as a new index that holds one copy of everything (a cache
        that appends keeps no matrix of its own). The new rows' sign bits use this index's centre:
        the prescreen only needs a stable centre, and the rescore of its shortlist is exact."""
        more = VectorIndex(ids, matrix, self.dtype)
        if len(self) == 0:
            return more
        if len(more) == 0:
            return self
        if more.dim != self.dim:
            raise VectorError(f"new rows have {more.dim} components, the index {self.dim}")
        unit = _normalized_block(np.atleast_2d(np.asarray(matrix, dtype=np.float32)))
        out = copy.copy(self)
        out.ids = np.concatenate([self.ids, more.ids])
        out._rows = np.concatenate([self._rows, more._rows])
        out._scales = (
            None
            if self._scales is None or more._scales is None
            else np.concatenate([self._scales, more._scales])
        )
        out._bits = np.concatenate([self._bits, self._signs(unit)])
        out._position = {int(i): n for n, i in enumerate(out.ids)} if len(out.ids) < 4096 else None
        return out

    @property
    def nbytes(self) -> int:
        """Memory held by the index's arrays (rows, scales, sign bits, ids)."""
        extra = 0 if self._scales is None else self._scales.nbytes
        return int(self._rows.nbytes + self._bits.nbytes + self.ids.nbytes + extra)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def _signs(self, rows: np.ndarray) -> np.ndarray:
        """Sign bits of the centered rows, packed and viewed as uint64 words (fewer XORs)."""
        packed = np.packbits((rows - self._mean) > 0, axis=-1)
        pad = (-packed.shape[-1]) % 8
        if pad:
            packed = np.pad(packed, [(0, 0)] * (packed.ndim - 1) + [(0, pad)])
        return np.ascontiguousarray(packed).view(np.uint64)

    def _exact(self, positions: np.ndarray, query: np.ndarray) -> np.ndarray:
        rows = self._rows[positions].astype(np.float32, copy=False)
        if self._scales is not None:
            rows = rows * self._scales[positions][:, None]
            norms = np.linalg.norm(rows, axis=1)
            return np.asarray((rows @ query) / np.where(norms > 0, norms, 1.0), dtype=np.float32)
        return np.asarray(rows @ query, dtype=np.float32)

    def _allowed_positions(self, allowed: np.ndarray) -> np.ndarray:
        wanted = np.asarray(allowed, dtype=np.int64).reshape(-1)
        if self._position is not None:
            return np.array(
                sorted({self._position[i] for i in wanted.tolist() if i in self._position}),
                dtype=np.int64,
            )
        return np.flatnonzero(np.isin(self.ids, wanted))

    def search(
        self,
        query: np.ndarray,
        k: int,
        multiplier: int = 8,
        allowed: np.ndarray | None = None,
        min_shortlist: int = MIN_SHORTLIST,
    ) -> list[tuple[int, float]]:
        """The ``k`` ids most similar to ``query`` as ``(id, cosine)``, best first.

        The prescreen keeps ``multiplier * k`` candidates, and at least ``min_shortlist``: the
        exact rescore of 160 rows costs about 0.05 ms, while a shortlist too short to hold the
        true neighbours costs recall (bench/knn.py: recall@10 0.95 at 10k and 0.94 at 1M with 80
        candidates, 0.98 with 160).

        ``allowed`` limits the answer to those ids (one conversation, or one owner's), applied
        before the prescreen so a small subset never loses its members to the rest of the store.
        Fewer than ``k`` rows give them all; a zero query or an empty index gives nothing."""
        if k <= 0 or len(self) == 0:
            return []
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise VectorError(f"query has {q.shape[0]} components, the index {self.dim}")
        _finite(q)
        norm = float(np.linalg.norm(q))
        if norm == 0:
            return []
        q = q / norm
        positions = None if allowed is None else self._allowed_positions(allowed)
        count = len(self) if positions is None else int(positions.shape[0])
        if count == 0:
            return []
        keep = max(k, k * max(1, multiplier), min_shortlist)
        if keep >= count:
            shortlist = np.arange(len(self)) if positions is None else positions
        else:
            bits = self._bits if positions is None else self._bits[positions]
            qbits = self._signs(q[None, :])[0]
            distance = _hamming(bits, qbits)
            near = np.argpartition(distance, keep - 1)[:keep]
            shortlist = near if positions is None else positions[near]
        scores = self._exact(shortlist, q)
        top = min(k, scores.shape[0])
        best = np.argpartition(-scores, top - 1)[:top]
        order = best[np.lexsort((self.ids[shortlist[best]], -scores[best]))]
        return [(int(self.ids[shortlist[i]]), float(scores[i])) for i in order]
