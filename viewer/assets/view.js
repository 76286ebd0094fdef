"use strict";
// hermes-lcm view: everything here runs from file:// with no network. Texts are written with
// textContent only; compressed chunks are inflated on first use and kept.
(function () {
  const META = JSON.parse(document.getElementById("lcm-meta").textContent);
  const F = {};
  META.node_fields.forEach((name, i) => { F[name] = i; });
  const PAGE = 50;
  const CATS = [["system", "--sys"], ["summaries", "--sum"], ["tail", "--tail"], ["tools", "--tool"]];

  // -- small DOM helpers (text only, never markup) ------------------------------------------
  function el(tag, attrs, ...kids) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else if (k.startsWith("data-")) node.setAttribute(k, String(v));
      else if (k === "title") node.title = v;
      else if (k === "style") node.setAttribute("style", v);
      else node[k] = v;
    }
    for (const kid of kids) if (kid !== null && kid !== undefined) node.append(kid);
    return node;
  }
  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...kids) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    for (const kid of kids) if (kid !== null && kid !== undefined) node.append(kid);
    return node;
  }
  const fmt = (n) => Number(n || 0).toLocaleString("en-US");
  const iso = (t) => (t ? new Date(t * 1000).toISOString().replace("T", " ").slice(0, 16) + "Z" : "–");
  // a time range, the second date left out when it is the first's: fits the header
  const span = (a, b) => { const x = iso(a), y = iso(b); return x.slice(0, 10) === y.slice(0, 10) ? `${x.slice(0, 16)} → ${y.slice(11)}` : `${x} → ${y}`; };
  function bytes(n) {
    const units = ["B", "KB", "MB", "GB", "TB"];
    let i = 0; n = Number(n || 0);
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }

  // -- compressed chunks ----------------------------------------------------------------------
  const inflated = new Map();
  function inflate(id) {
    if (!inflated.has(id)) {
      const raw = atob(document.getElementById(id).textContent);
      const buf = new Uint8Array(raw.length);
      for (let i = 0; i < raw.length; i++) buf[i] = raw.charCodeAt(i);
      const stream = new Blob([buf]).stream().pipeThrough(new DecompressionStream("deflate"));
      inflated.set(id, new Response(stream).text().then(JSON.parse));
    }
    return inflated.get(id);
  }
  function chunkOf(ranges, key) {  // binary search over [first, last, count]
    let lo = 0, hi = ranges.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (key < ranges[mid][0]) hi = mid - 1; else if (key > ranges[mid][1]) lo = mid + 1; else return mid;
    }
    return -1;
  }
  const bySeqCache = new Map();
  async function messageChunk(i) {
    if (!bySeqCache.has(i)) {
      const rows = await inflate("m" + i);
      bySeqCache.set(i, new Map(rows.map((r) => [r[0], r])));
    }
    return bySeqCache.get(i);
  }
  async function messages(seqs) {
    const out = [];
    for (const seq of seqs) {
      const c = chunkOf(META.message_chunks, seq);
      const row = c < 0 ? null : (await messageChunk(c)).get(seq);
      out.push(row || [seq, null, "?", 0, 0, "", "", "(not in this page)"]);
    }
    return out;
  }

  // -- the DAG --------------------------------------------------------------------------------
  const nodes = META.nodes.map((r, index) => ({ row: r, index, id: r[F.id], depth: r[F.depth] }));
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const parents = new Map();
  const inContext = new Set(META.context);
  for (const n of nodes) {
    const kids = META.children[String(n.id)] || { s: [], m: [] };
    n.kidsS = kids.s.filter((id) => byId.has(id));
    n.kidsM = kids.m;
    for (const k of n.kidsS) { if (!parents.has(k)) parents.set(k, []); parents.get(k).push(n.id); }
  }
  async function summaryText(n) {
    let start = 0;
    for (let i = 0; i < META.summary_chunks.length; i++) {
      const count = META.summary_chunks[i][2];
      if (n.index < start + count) return (await inflate("s" + i))[n.index - start];
      start += count;
    }
    return "";
  }
  const leaves = nodes.filter((n) => n.kidsS.length === 0).sort((a, b) => a.row[F.first_seq] - b.row[F.first_seq]);
  leaves.forEach((n, i) => { n.slot = [i, i + 1]; });
  function slotOf(n) {
    if (n.slot) return n.slot;
    n.slot = [Infinity, -Infinity];  // guards a cycle a damaged database could hold
    for (const k of n.kidsS) {
      const s = slotOf(byId.get(k));
      n.slot = [Math.min(n.slot[0], s[0]), Math.max(n.slot[1], s[1])];
    }
    if (!isFinite(n.slot[0])) n.slot = [0, 1];
    return n.slot;
  }
  nodes.forEach(slotOf);
  const conv = META.conversation;
  const tailCount = Math.max(0, conv.last_seq - conv.frontier_seq);
  const slots = leaves.length + (tailCount ? 2 : 0) || 1;
  const maxDepth = nodes.reduce((m, n) => Math.max(m, n.depth), 0);
  let slotWidth = 0;

  function sourceSeqs(n) {
    if (n.seqs) return n.seqs;
    const seen = new Set();
    const walk = (x, guard) => {
      if (guard.has(x.id)) return;
      guard.add(x.id);
      x.kidsM.forEach((s) => seen.add(s));
      x.kidsS.forEach((k) => walk(byId.get(k), guard));
    };
    walk(n, new Set());
    n.seqs = Array.from(seen).sort((a, b) => a - b);
    return n.seqs;
  }
  let leafOfSeq = null;
  function leafFor(seq) {
    if (!leafOfSeq) {
      leafOfSeq = new Map();
      for (const n of nodes) for (const s of n.kidsM) leafOfSeq.set(s, n.id);
    }
    return leafOfSeq.get(seq);
  }
  async function tailSeqs() {
    const out = [];
    for (let i = 0; i < META.message_chunks.length; i++) {
      if (META.message_chunks[i][1] <= conv.frontier_seq) continue;
      for (const seq of (await messageChunk(i)).keys()) if (seq > conv.frontier_seq) out.push(seq);
    }
    return out;
  }

  function nodeTitle(n) {
    const r = n.row;
    return `${label(n)} · depth ${n.depth} · ${fmt(r[F.tokens])} tokens from ${fmt(r[F.source_tokens])}` +
      ` · ${iso(r[F.earliest_at])} → ${iso(r[F.latest_at])}` + (inContext.has(n.id) ? " · in the active context" : "");
  }
  const label = (n) => "S" + n.id;

  function drawDag() {
    const dag = document.getElementById("dag");
    dag.textContent = "";
    if (!slotWidth) slotWidth = Math.max(6, (dag.clientWidth - 24) / slots);
    const width = Math.ceil(slots * slotWidth) + 16;
    const lanes = [];
    for (let d = maxDepth; d >= 0; d--) {
      const lane = el("div", { class: "lane", "data-depth": d, style: `width:${width}px` },
        el("span", { class: "lane-label", text: `depth ${d}` }));
      lanes[d] = lane;
      dag.append(lane);
    }
    const raw = el("div", { class: "lane", "data-depth": "raw", style: `width:${width}px` },
      el("span", { class: "lane-label", text: "fresh tail" }));
    dag.append(raw);
    for (const n of nodes) {
      const [a, b] = n.slot;
      const w = Math.max(3, (b - a) * slotWidth - 2);
      const cls = `node depth-${Math.min(n.depth, 4)}` + (inContext.has(n.id) ? " ctx" : "") + (n.id === selected ? " sel" : "");
      const box = el("div", { class: cls, "data-node": label(n), "data-depth": n.depth, title: nodeTitle(n),
        style: `left:${8 + a * slotWidth}px;width:${w}px`, onclick: () => select(n.id) },
      w >= 30 ? label(n) : w >= 16 ? String(n.id) : "");  // narrow: the number alone; narrower: hover or zoom
      n.box = box;
      (lanes[n.depth] || lanes[0]).append(box);
    }
    if (tailCount) {
      const a = leaves.length;
      raw.append(el("div", { class: "node tail", "data-node": "tail", title: `${fmt(tailCount)} raw messages after the frontier`,
        style: `left:${8 + a * slotWidth}px;width:${Math.max(3, 2 * slotWidth - 2)}px`, onclick: () => select("tail") },
      2 * slotWidth >= 30 ? `${fmt(tailCount)} raw` : ""));
    }
    document.getElementById("dag-legend").textContent =
      `${fmt(nodes.length)} summaries · ${fmt(leaves.length)} leaves · depth ${nodes.length ? maxDepth : "–"} · ` +
      `yellow edge: in the active context · ${fmt(tailCount)} raw messages in the fresh tail` +
      (nodes.some((n) => (n.slot[1] - n.slot[0]) * slotWidth - 2 < 16) ? " · a box too narrow for its id: hover it, or zoom in (+)" : "");
  }
  function zoom(factor) {
    const dag = document.getElementById("dag");
    const centre = (dag.scrollLeft + dag.clientWidth / 2) / (slotWidth || 1);
    slotWidth = factor ? Math.max(2, Math.min(400, slotWidth * factor)) : 0;
    drawDag();
    dag.scrollLeft = centre * slotWidth - dag.clientWidth / 2;
  }

  // -- the detail panel -------------------------------------------------------------------------
  let selected = null;
  let view = { seqs: [], offset: 0, focus: null };
  function link(id) {
    return el("span", { class: "node-link", "data-node": "S" + id, text: "S" + id, onclick: () => select(id) });
  }
  function kv(pairs) {
    const box = el("div", { class: "kv" });
    for (const [k, v] of pairs) box.append(el("div", { text: k }), el("div", {}, v));
    return box;
  }
  function highlightRelated(id) {
    document.querySelectorAll(".node.sel, .node.rel").forEach((b) => b.classList.remove("sel", "rel"));
    const n = byId.get(id);
    if (!n) return;
    n.box && n.box.classList.add("sel");
    for (const k of [...n.kidsS, ...(parents.get(id) || [])]) { const o = byId.get(k); o && o.box && o.box.classList.add("rel"); }
    if (n.box) n.box.scrollIntoView({ block: "nearest", inline: "center" });
  }
  async function select(id, focusSeq) {
    selected = id;
    const detail = document.getElementById("detail");
    detail.textContent = "";
    if (id === "tail") {
      detail.append(el("h2", { text: "Fresh tail" }),
        el("p", { class: "muted", text: `${fmt(tailCount)} raw messages after the frontier (seq ${conv.frontier_seq}); ` +
          "the prompt carries them verbatim until a compaction summarizes them." }));
      await showSources(detail, await tailSeqs(), focusSeq);
      document.documentElement.dataset.selected = "tail";
      return;
    }
    const n = byId.get(id);
    if (!n) return;
    highlightRelated(id);
    const r = n.row;
    const ratio = r[F.tokens] ? (r[F.source_tokens] / r[F.tokens]).toFixed(1) + "×" : "–";
    const kids = n.kidsS.length ? el("span", {}, ...n.kidsS.map(link))
      : el("span", { text: `${fmt(n.kidsM.length)} messages (seq ${r[F.first_seq]}–${r[F.last_seq]})` });
    const ups = parents.get(n.id) || [];
    detail.append(
      el("h2", { text: `${label(n)} · ${n.kidsS.length ? "condensed" : "leaf"} summary` }),
      kv([
        ["depth", String(n.depth)],
        ["time range", `${iso(r[F.earliest_at])} → ${iso(r[F.latest_at])}`],
        ["made", iso(r[F.created_at])],
        ["tokens", `${fmt(r[F.tokens])} summary · ${fmt(r[F.source_tokens])} source (${ratio})`],
        ["messages", `seq ${r[F.first_seq]}–${r[F.last_seq]}`],
        ["in context", inContext.has(n.id) ? "yes (the prompt shows it now)" : "no (stored, searchable, expandable)"],
        ["level · route", `${r[F.level]} · ${r[F.route]}`],
        ["session", String(r[F.session_id])],
        ["parents", ups.length ? el("span", {}, ...ups.map(link)) : "none (a root)"],
        ["children", kids],
      ]),
      el("h3", { text: "Text" }));
    const text = el("div", { class: "text", id: "detail-text", text: "…" });
    detail.append(text);
    text.textContent = await summaryText(n);
    if (selected !== id) return;
    await showSources(detail, sourceSeqs(n), focusSeq);
    document.documentElement.dataset.selected = label(n);
  }
  async function showSources(detail, seqs, focusSeq) {
    view = { seqs, offset: 0, focus: focusSeq ?? null };
    if (focusSeq !== undefined) {
      const at = seqs.indexOf(focusSeq);
      if (at >= 0) view.offset = Math.floor(at / PAGE) * PAGE;
    }
    const prev = el("button", { id: "sources-prev", text: "‹ newer", onclick: () => page(-PAGE) });
    prev.textContent = "‹ previous";
    const next = el("button", { id: "sources-next", text: "next ›", onclick: () => page(PAGE) });
    detail.append(el("h3", { text: `Source messages (${fmt(seqs.length)})` }),
      el("div", { class: "pager" }, prev, el("span", { id: "sources-range", class: "muted" }), next),
      el("div", { id: "sources" }));
    await renderPage();
  }
  async function page(delta) {
    const offset = view.offset + delta;
    if (offset < 0 || offset >= view.seqs.length) return;
    view.offset = offset;
    await renderPage();
  }
  async function renderPage() {
    const box = document.getElementById("sources");
    const slice = view.seqs.slice(view.offset, view.offset + PAGE);
    const rows = await messages(slice);
    box.textContent = "";
    for (const [seq, id, role, at, tokens, tool, session, text] of rows) {
      const item = el("div", { class: "source" + (seq === view.focus ? " hl" : ""), "data-seq": seq,
        "data-store-id": id === null ? "" : id },
      el("div", { class: "source-head" }, el("span", { class: "role", text: role + (tool ? ` · ${tool}` : "") }),
        el("span", { text: `seq ${seq}` }), el("span", { text: `store_id ${id}` }), el("span", { text: iso(at) }),
        el("span", { text: `${fmt(tokens)} tokens` }), el("span", { text: session })),
      el("div", { class: "source-text", text }));
      box.append(item);
      if (seq === view.focus) requestAnimationFrame(() => item.scrollIntoView({ block: "center" }));
    }
    const end = Math.min(view.seqs.length, view.offset + PAGE);
    document.getElementById("sources-range").textContent =
      view.seqs.length ? `${fmt(view.offset + 1)}–${fmt(end)} of ${fmt(view.seqs.length)}` : "none";
    document.getElementById("sources-prev").disabled = view.offset === 0;
    document.getElementById("sources-next").disabled = end >= view.seqs.length;
  }

  // -- compactions --------------------------------------------------------------------------------
  function preparedNote() {
    // Deferred compaction: what waits for the next compaction, published then without a model call.
    const prepared = META.prepared || { waiting: [], last_error: null };
    const parts = [];
    if (prepared.waiting.length) {
      const leaves = prepared.waiting.filter((p) => p[0] === 0);
      const tokens = prepared.waiting.reduce((s, p) => s + p[3], 0);
      const span = leaves.length ? ` over seq ${fmt(Math.min(...leaves.map((p) => p[1])))}–` +
        `${fmt(Math.max(...leaves.map((p) => p[2])))}` : "";
      parts.push(`Prepared for the next compaction: ${fmt(prepared.waiting.length)} summaries (` +
        `${fmt(leaves.length)} leaves${span}, ${fmt(tokens)} tokens), published then without a model call.`);
    } else {
      parts.push("Nothing prepared for the next compaction.");
    }
    const failed = prepared.last_error;
    if (failed) parts.push(`Last failed preparation (${new Date(failed.at * 1000).toLocaleString()}): ` +
      `${typeof failed.detail === "string" ? failed.detail : JSON.stringify(failed.detail)}`);
    const cache = META.prompt_cache || { replies: 0 };
    if (cache.replies) {
      const pct = (x) => (x === null || x === undefined ? "–" : `${Math.round(x * 100)}%`);
      parts.push(`Prompt cache: ${pct(cache.cached_share)} of input tokens read from the provider's ` +
        `cache over ${fmt(cache.replies)} replies, ${pct(cache.cached_share_after_compaction)} right ` +
        `after a compaction (${fmt(cache.replies_after_compaction)} replies).`);
    }
    return el("p", { class: "prepared", id: "prepared", text: parts.join(" ") });
  }

  function drawTimeline() {
    const box = document.getElementById("timeline");
    box.textContent = "";
    box.append(preparedNote());
    const recorded = META.compactions;
    if (!recorded.length && !META.derived_compactions.length) {
      box.append(el("p", { class: "muted", text: "No compaction yet: the whole conversation still fits the prompt." }));
      return;
    }
    if (!recorded.length) return drawDerived(box, META.derived_compactions);
    const rebuilt = recorded.filter((c) => c.rebuild).length;
    box.append(el("p", { class: "muted", text: `${fmt(recorded.length)} compactions, each a compress that changed ` +
      `the prompt (what Hermes counts)` + (rebuilt ? `: ${fmt(recorded.length - rebuilt)} made new summaries, ` +
      `${fmt(rebuilt)} rebuilt the prompt from stored ones` : "") + ". Each pair of bars is the prompt before and " +
      "after: tokens of the system prompt, summaries, fresh tail and tool messages." }));
    const legend = el("div", { class: "legend" });
    for (const [name, colour] of CATS) legend.append(el("span", { text: name, style: `--c:var(${colour})` }));
    legend.append(el("span", { class: "line", text: "budget: what the whole prompt may reach (threshold less the reserve)",
      style: "--c:#e74c3c" }));
    box.append(legend);
    const total = (p) => CATS.reduce((s, [k]) => s + ((p && p[k]) || 0), 0);
    const top = Math.max(1, ...recorded.map((c) => Math.max(total(c.before), total(c.after), c.limit || 0)));
    const H = 240, TOP = 12, W = Math.max(box.clientWidth - 20, recorded.length * 30 + 60), step = (W - 50) / recorded.length;
    const bw = Math.max(2, Math.min(12, step / 2 - 2));
    const plot = svg("svg", { width: W, height: H + 30 + TOP, role: "img" });
    const frame = svg("g", { transform: `translate(0,${TOP})` });  // room above the top label
    plot.append(frame);
    for (const f of [0, 0.5, 1]) {
      const y = H - f * H;
      frame.append(svg("line", { x1: 44, x2: W, y1: y, y2: y, stroke: "#2a323c" }),
        svg("text", { x: 0, y: y + 3 }, fmt(Math.round(top * f))));
    }
    recorded.forEach((c, i) => {
      const g = svg("g", { class: "compaction", "data-at": c.at });
      const x0 = 50 + i * step;
      [[c.before, x0], [c.after, x0 + bw + 1]].forEach(([p, x]) => {
        let y = H;
        for (const [k, colour] of CATS) {
          const h = (((p && p[k]) || 0) / top) * H;
          if (h > 0) g.append(svg("rect", { x, y: y - h, width: bw, height: h,
            fill: getComputedStyle(document.documentElement).getPropertyValue(colour) }));
          y -= h;
        }
      });
      if (c.limit) g.append(svg("line", { x1: x0 - 1, x2: x0 + 2 * bw + 2, y1: H - (c.limit / top) * H,
        y2: H - (c.limit / top) * H, stroke: "#e74c3c" }));
      const t = svg("title", {});
      t.textContent = `${iso(c.at)}\nbefore ${fmt(total(c.before))} → after ${fmt(total(c.after))} tokens` +
        `\n${(c.nodes || []).length} new summaries` + (c.rebuild ? " (rebuilt from stored summaries)" : "") +
        (c.limit ? `\nbudget ${fmt(c.limit)} (the red line)` : "");
      g.append(t);
      frame.append(g);
    });
    box.append(plot);
    const table = el("table", {}, el("tr", {}, ...["when", "before", "after", "new summaries", "system", "summaries",
      "fresh tail", "tools"].map((h) => el("th", { text: h }))));
    for (const c of recorded.slice(-200).reverse()) {
      table.append(el("tr", {}, el("td", { text: iso(c.at).slice(5), title: iso(c.at) }), el("td", { text: fmt(total(c.before)) }),
        el("td", { text: fmt(total(c.after)) }), el("td", {}, ...(c.nodes || []).slice(0, 6).map(link)),
        ...CATS.map(([k]) => el("td", { text: `${fmt((c.before || {})[k])} → ${fmt((c.after || {})[k])}` }))));
    }
    box.append(el("h3", { text: "Newest compactions" }), el("div", { class: "table-wrap" }, table));
  }
  function drawDerived(box, groups) {
    box.append(el("p", { class: "muted", text: "This conversation was compacted before hermes-lcm kept a record of " +
      "each prompt; each bar shows what one pass summarized (source tokens) and what it produced." }));
    const legend = el("div", { class: "legend" },
      el("span", { text: "source tokens", style: "--c:var(--tail)" }), el("span", { text: "summary tokens", style: "--c:var(--sum)" }));
    box.append(legend);
    const top = Math.max(1, ...groups.map((g) => g.source_tokens));
    const H = 200, W = Math.max(box.clientWidth - 20, groups.length * 20 + 60), step = (W - 50) / groups.length;
    const plot = svg("svg", { width: W, height: H + 20 });
    groups.forEach((g, i) => {
      const grp = svg("g", { class: "compaction", "data-at": g.at });
      const x = 50 + i * step, bw = Math.max(2, Math.min(10, step / 2 - 1));
      const hs = (g.source_tokens / top) * H, ho = (g.summary_tokens / top) * H;
      grp.append(svg("rect", { x, y: H - hs, width: bw, height: hs, fill: "#58d68d" }),
        svg("rect", { x: x + bw + 1, y: H - ho, width: bw, height: ho, fill: "#5dade2" }));
      const t = svg("title", {});
      t.textContent = `${iso(g.at)}: ${fmt(g.source_tokens)} → ${fmt(g.summary_tokens)} tokens, ${g.nodes.length} summaries`;
      grp.append(t);
      plot.append(grp);
    });
    box.append(plot);
  }

  // -- the database -------------------------------------------------------------------------------
  function drawGrowth() {
    const box = document.getElementById("growth");
    box.textContent = "";
    const db = META.database;
    box.append(el("h2", { text: "Database" }), kv([
      ["file", db.path], ["size", `${bytes(db.bytes)} (${bytes(db.free_bytes)} free pages)`],
      ["schema", String(db.schema_version)], ["written", iso(META.generated_at)]]));
    if (db.bytes_by_table) {
      const rows = Object.entries(db.bytes_by_table).sort((a, b) => b[1] - a[1]).slice(0, 14);
      const top = Math.max(1, ...rows.map((r) => r[1]));
      const table = el("table", {}, el("tr", {}, el("th", { text: "table or index" }), el("th", { text: "bytes" }), el("th", { text: "" })));
      for (const [name, size] of rows) table.append(el("tr", {}, el("td", { text: name }), el("td", { text: bytes(size) }),
        el("td", { style: "width:40%" }, el("div", { class: "bar", style: `width:${(100 * size) / top}%` }))));
      box.append(el("h3", { text: "Where the bytes are" }), table);
    }
    const months = META.growth;
    const top = Math.max(1, ...months.map((m) => m.message_bytes + (m.summary_bytes || 0)));
    const table = el("table", {}, el("tr", {}, ...["month", "messages", "message text", "summaries", "summary text",
      "total so far", ""].map((h) => el("th", { text: h }))));
    let running = 0;
    for (const m of months) {
      running += m.message_bytes + (m.summary_bytes || 0);
      table.append(el("tr", { class: "month", "data-month": m.month }, el("td", { text: m.month }),
        el("td", { text: fmt(m.messages) }), el("td", { text: bytes(m.message_bytes) }), el("td", { text: fmt(m.summaries) }),
        el("td", { text: bytes(m.summary_bytes) }), el("td", { text: bytes(running) }),
        el("td", { style: "width:30%" }, el("div", { class: "bar",
          style: `width:${(100 * (m.message_bytes + (m.summary_bytes || 0))) / top}%` }))));
    }
    const cutoff = (days) => new Date((META.generated_at - days * 86400) * 1000).toISOString().slice(0, 7);
    const older = (days) => months.filter((m) => m.month < cutoff(days))
      .reduce((a, m) => [a[0] + m.messages, a[1] + m.message_bytes + (m.summary_bytes || 0)], [0, 0]);
    const ages = el("div", { class: "kv", id: "retention" });
    for (const days of [30, 90, 365]) {
      const [n, b] = older(days);
      ages.append(el("div", { text: `before ${cutoff(days)}` }), el("div", { text: `${fmt(n)} messages · ${bytes(b)} of text` }));
    }
    box.append(el("h3", { text: "Retention at a glance (whole months older than 30, 90, 365 days)" }), ages);
    box.append(el("h3", { text: "Growth by month (text stored)" }), table,
      el("p", { class: "muted", text: "Retention: `lcm retention` lists what each conversation holds by age and how to bound it; " +
        "nothing is deleted by compaction." }));
  }

  // -- search ---------------------------------------------------------------------------------------
  let searchRun = 0;
  const lowerCache = new Map();  // a chunk's texts lower-cased once: later searches only scan
  async function lowered(id, rows) {
    if (!lowerCache.has(id)) lowerCache.set(id, rows.map((r) => r[7].toLowerCase()));
    return lowerCache.get(id);
  }
  function snippet(text, terms) {
    const low = text.toLowerCase();
    let at = low.indexOf(terms[0]);
    at = Math.max(0, at - 60);
    const part = text.slice(at, at + 240);
    const out = el("div", { class: "snip" });
    const re = new RegExp(terms.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|"), "gi");
    let last = 0;
    for (const m of part.matchAll(re)) {
      out.append(part.slice(last, m.index), el("mark", { text: m[0] }));
      last = m.index + m[0].length;
    }
    out.append(part.slice(last) + (at + 240 < text.length ? " …" : ""));
    if (at > 0) out.prepend("… ");
    return out;
  }
  async function search(query) {
    const run = ++searchRun;
    const terms = query.toLowerCase().split(/\s+/).filter(Boolean);
    showTab("results");
    const box = document.getElementById("results");
    box.textContent = "";
    if (!terms.length) return;
    const status = el("p", { class: "muted", id: "search-status", text: "Searching…" });
    box.append(status);
    const matches = (text) => { const low = text.toLowerCase(); return terms.every((t) => low.includes(t)); };
    let found = 0;
    const LIMIT = 300;
    for (let i = 0; i < META.summary_chunks.length && found < LIMIT; i++) {
      const texts = await inflate("s" + i);
      let start = 0;
      for (let j = 0; j < i; j++) start += META.summary_chunks[j][2];
      texts.forEach((t, k) => {
        if (found >= LIMIT || !matches(t)) return;
        const n = nodes[start + k];
        found++;
        box.append(el("div", { class: "hit", "data-kind": "summary", "data-id": label(n), onclick: () => { showTab("dag"); select(n.id); } },
          el("div", { class: "where", text: `summary ${label(n)} · depth ${n.depth} · ${iso(n.row[F.earliest_at])}` }), snippet(t, terms)));
      });
    }
    for (let i = 0; i < META.message_chunks.length && found < LIMIT; i++) {
      if (run !== searchRun) return;
      const rows = await inflate("m" + i);
      const lower = await lowered("m" + i, rows);
      for (let r = 0; r < rows.length && found < LIMIT; r++) {
        if (!terms.every((t) => lower[r].includes(t))) continue;
        const [seq, id, role, at, , tool, , text] = rows[r];
        found++;
        const leaf = leafFor(seq);
        box.append(el("div", { class: "hit", "data-kind": "message", "data-id": id, "data-seq": seq,
          onclick: () => { showTab("dag"); select(leaf !== undefined ? leaf : "tail", seq); } },
        el("div", { class: "where", text: `message ${id} · seq ${seq} · ${role}${tool ? " · " + tool : ""} · ${iso(at)}` +
          (leaf !== undefined ? ` · in S${leaf}` : " · fresh tail") }), snippet(text, terms)));
      }
      status.textContent = `Searching… ${fmt(META.message_chunks[i][1])} of ${fmt(conv.last_seq)}`;
    }
    if (run !== searchRun) return;
    status.textContent = found >= LIMIT ? `First ${LIMIT} matches (narrow the search for more).`
      : `${fmt(found)} match${found === 1 ? "" : "es"} for every word of “${query}”.`;
    document.documentElement.dataset.searched = String(found);
  }

  // -- tabs and start ---------------------------------------------------------------------------------
  const drawn = new Set();
  function showTab(name) {
    document.querySelectorAll(".tabs button").forEach((b) => b.classList.toggle("on", b.dataset.tab === name));
    document.querySelectorAll(".pane").forEach((p) => p.classList.toggle("on", p.id === "pane-" + name));
    if (!drawn.has(name)) {  // drawn once visible, so charts take the pane's width
      drawn.add(name);
      if (name === "timeline") drawTimeline();
      if (name === "growth") drawGrowth();
    }
  }
  function start() {
    const facts = document.getElementById("facts");
    facts.append(el("b", { text: `conversation ${conv.id}` }), ` ${conv.key} · `,
      el("b", { text: fmt(conv.messages) }), " messages · ", el("b", { text: fmt(conv.tokens) }), " tokens · ",
      el("b", { text: fmt(conv.summaries) }), " summaries · ", span(conv.first_at, conv.last_at));
    facts.title = facts.textContent;  // the whole line, should a narrow window still cut it
    document.querySelectorAll(".tabs button").forEach((b) => b.addEventListener("click", () => showTab(b.dataset.tab)));
    document.getElementById("zoom-in").addEventListener("click", () => zoom(1.6));
    document.getElementById("zoom-out").addEventListener("click", () => zoom(1 / 1.6));
    document.getElementById("zoom-fit").addEventListener("click", () => zoom(0));
    const input = document.getElementById("search");
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") search(input.value); });
    drawDag();
    document.documentElement.dataset.ready = "1";
  }
  window.lcmView = { select, search, meta: META };
  try {
    start();
  } catch (err) {
    document.body.prepend(el("pre", { class: "text", text: "The page could not be drawn: " + err }));
    throw err;
  }
})();
