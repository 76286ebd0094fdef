"""Database bytes per message with embeddings off, int8 and float32 (the local MiniLM, dim 384).

One command: ``.venv/bin/python bench/vector_growth.py [--data ../shared/data/locomo] [--files conv-30,conv-41]``.

The LoCoMo conversations (real chat text, read in place) are stored through the engine with
embeddings off; the file is measured after VACUUM (``page_count * page_size``). Then the same
database gets every message embedded by ``embedder.Embedder.backfill`` with the local provider,
once stored as int8 and once as float32 (the provider's answers are computed once and reused, so
both forms hold the same vectors), each on its own copy, measured after VACUUM again. The figure is
the growth per stored message: the vector blob, its row and the unique index, and the page slack.
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(
    0, str(ROOT / ".pyroot")
)  # this checkout's hermes_lcm (a worktree has .pyroot/hermes_lcm)
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo"


def turns_of(path: Path) -> list[dict[str, Any]]:
    """A LoCoMo conversation as host messages (speaker a: user, b: assistant)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    first, out, n = data["speaker_a"], [], 1
    while f"session_{n}" in data:
        for turn in data[f"session_{n}"]:
            out.append(
                {
                    "role": "user" if turn["speaker"] == first else "assistant",
                    "content": f"{turn['speaker']}: {turn['text']}",
                }
            )
        n += 1
    return out


def vacuumed_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
        count = conn.execute("PRAGMA page_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int(count) * int(size)


class Cached:
    """The local provider with its answers kept: int8 and float32 store the very same vectors."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.local = inner, inner.name, inner.local
        self.max_chars = getattr(inner, "max_chars", 4000)
        self.memo: dict[str, np.ndarray] = {}
        self.seconds = 0.0

    def embed(self, texts: Sequence[str], *, timeout: float | None = None) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if todo:
            started = time.monotonic()
            for text, row in zip(todo, self.inner.embed(todo, timeout=timeout), strict=True):
                self.memo[text] = row
            self.seconds += time.monotonic() - started
        return np.stack([self.memo[t] for t in texts]).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument(
        "--files", default="conv-30,conv-41", help="conversations (comma-separated stems)"
    )
    args = parser.parse_args()

    from hermes_lcm import store as store_module
    from hermes_lcm.config import LcmConfig
    from hermes_lcm.embed import provider_for
    from hermes_lcm.embed.embedder import Embedder
    from hermes_lcm.engine import LcmEngine

    work = Path(tempfile.mkdtemp(prefix="lcm-bench-growth-"))
    try:
        base = work / "off"
        base.mkdir()
        messages = 0
        for stem in args.files.split(","):
            engine = copy.deepcopy(
                LcmEngine(env={"HERMES_HOME": str(base), "LCM_SUMMARY_PROVIDER": "extractive"})
            )
            engine.update_model("bench-model", 1_000_000)
            engine.on_session_start(f"locomo-{stem}", hermes_home=str(base), platform="bench")
            messages += engine.ingest_host(turns_of(Path(args.data) / f"{stem}.json"))
        store_module.close_all()
        off = vacuumed_bytes(base / "lcm.db")
        settings = replace(LcmConfig(), embeddings_enabled=True, embedding_provider="local")
        provider = Cached(provider_for(settings, {}))
        sizes: dict[str, Any] = {
            "off": {"bytes": off, "bytes_per_message": round(off / messages, 1)}
        }
        for dtype in ("int8", "float32"):
            copy_dir = work / dtype
            copy_dir.mkdir()
            shutil.copy(base / "lcm.db", copy_dir / "lcm.db")
            store = store_module.open_store(copy_dir / "lcm.db")
            config = replace(settings, embedding_storage_dtype=dtype)
            embedder = Embedder(store, provider, config)  # type: ignore[arg-type]
            done = embedder.backfill().done
            stats = store.vector_stats()
            store_module.close_all()
            total = vacuumed_bytes(copy_dir / "lcm.db")
            sizes[dtype] = {
                "bytes": total,
                "bytes_per_message": round(total / messages, 1),
                "embedded": done,
                "growth_per_message": round((total - off) / messages, 1),
                "growth_ratio": round(total / off, 2),
                "dim": embedder.dim,
                "blob_bytes_per_vector": stats["models"][0]["blob_bytes"] / max(1, done),
            }
            print(dtype, sizes[dtype], flush=True)
    finally:
        store_module.close_all()
        shutil.rmtree(work, ignore_errors=True)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from common import print_table, save_result

    rows = [
        {
            "target": f"database bytes per message ({messages} LoCoMo messages, after VACUUM): off / int8 / float32",
            "ours": " / ".join(
                str(sizes[k]["bytes_per_message"]) for k in ("off", "int8", "float32")
            ),
            "reference": f"growth int8 +{sizes['int8']['growth_per_message']}, "
            f"float32 +{sizes['float32']['growth_per_message']} bytes per message",
        }
    ]
    print_table(rows)
    save_result(
        "vector_growth",
        rows,
        {
            "files": args.files,
            "messages": messages,
            "sizes": sizes,
            "model": provider.name,
            "embed_seconds": round(provider.seconds, 1),
        },
    )


if __name__ == "__main__":
    main()
