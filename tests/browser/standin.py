# ruff: noqa: E501
"""A stand-in for ``hermes_lcm.viewer.write_page`` that follows the page contract, used only until the
real viewer is on this branch: it lets the harness be checked against a page built from a real store.

The contract (what the tests rely on): ``dataset.ready``; ``#dag .node[data-node][data-depth]``;
a click fills ``#detail`` (``#detail-text``, ``.node-link``, ``#sources .source[data-seq][data-store-id]
.source-text``, ``#sources-next`` / ``#sources-prev``); ``#timeline svg .compaction``; ``input#search`` ->
``#results .hit[data-kind][data-id]``; ``#growth .month``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from hermes_lcm.records import node_label

PAGE = 5
SCRIPT = r"""
const D = JSON.parse(document.getElementById('data').textContent);
const $ = (s) => document.querySelector(s);
function el(tag, attrs, text) { const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text; return e; }
let cur = null, off = 0;
function show(label) { cur = D.nodes[label]; off = 0; $('#detail-text').textContent = cur.text;
  const kids = $('#children'); kids.replaceChildren();
  for (const c of cur.children) { const a = el('a', {class: 'node-link', href: '#'}, c); a.onclick = () => show(c); kids.append(a); }
  page(); }
function page() { const box = $('#sources'); box.replaceChildren();
  for (const s of cur.sources.slice(off, off + PAGE)) { const d = el('div', {class: 'source', 'data-seq': s.seq, 'data-store-id': s.id});
    d.append(el('pre', {class: 'source-text'}, s.text)); box.append(d); } }
for (const [label, n] of Object.entries(D.nodes)) { const b = el('button', {class: 'node', 'data-node': label, 'data-depth': n.depth}, label);
  b.onclick = () => show(label); $('#dag').append(b); }
$('#sources-next').onclick = () => { if (cur && off + PAGE < cur.sources.length) { off += PAGE; page(); } };
$('#sources-prev').onclick = () => { if (cur && off > 0) { off -= PAGE; page(); } };
const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg'); svg.setAttribute('width', '600'); svg.setAttribute('height', '40');
D.nodes && Object.keys(D.nodes).forEach((l, i) => { const g = document.createElementNS('http://www.w3.org/2000/svg', 'g'); g.setAttribute('class', 'compaction');
  const r = document.createElementNS('http://www.w3.org/2000/svg', 'rect'); r.setAttribute('x', i * 12); r.setAttribute('width', 10); r.setAttribute('height', 30); g.append(r); svg.append(g); });
$('#timeline').append(svg);
for (const m of D.months) $('#growth').append(el('div', {class: 'month'}, m));
function search() { const q = $('#search').value.toLowerCase(); const out = $('#results'); out.replaceChildren(); if (!q) return;
  for (const m of D.messages) if (m.text.toLowerCase().includes(q)) out.append(el('div', {class: 'hit', 'data-kind': 'message', 'data-id': m.id}, m.text.slice(0, 200)));
  for (const [l, n] of Object.entries(D.nodes)) if (n.text.toLowerCase().includes(q)) out.append(el('div', {class: 'hit', 'data-kind': 'summary', 'data-id': l}, n.text.slice(0, 200))); }
$('#search').addEventListener('input', search);
document.documentElement.dataset.ready = '1';
""".replace("PAGE", str(PAGE))


def write_page(store: Any, path: str | Path, conversation_id: int | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    cid = conversation_id or store.conversations_page(0, 1)[0]["id"]
    summaries = store.summaries(cid, limit=100000)
    nodes = {node_label(s.id): {"depth": s.depth, "text": s.content,
                                "children": [node_label(c.id) for c in store.child_summaries(s.id)],
                                "sources": [{"seq": m.seq, "id": m.id, "text": m.content}
                                            for m in store.summary_sources(s.id)]} for s in summaries}
    messages = store.messages_after(cid, 0)
    data = {"nodes": nodes, "months": sorted({time.strftime("%Y-%m", time.gmtime(m.created_at)) for m in messages}),
            "messages": [{"id": m.id, "text": m.content} for m in messages]}
    blob = json.dumps(data).replace("<", "\\u003c")
    html = ("<!doctype html><meta charset=utf-8><title>lcm view (stand-in)</title>"
            "<input id=search><div id=results></div><div id=dag></div>"
            "<div id=detail><div id=detail-text></div><div id=children></div><div id=sources></div>"
            "<button id=sources-prev>prev</button><button id=sources-next>next</button></div>"
            "<div id=timeline></div><div id=growth></div>"
            f"<script type=application/json id=data>{blob}</script><script>{SCRIPT}</script>")
    Path(path).write_text(html, encoding="utf-8")
    return {"path": str(path), "bytes": len(html.encode()), "conversation_id": cid, "messages": len(messages),
            "summaries": len(summaries), "seconds": time.perf_counter() - started}
