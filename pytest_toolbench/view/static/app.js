/* toolbench view: the client side of the static site (pytest_toolbench/view/site.py).
 *
 * Everything works from file://: data arrives as <script> files that call TB.index / TB.chunk
 * (a file:// page may not fetch() local files). The case list renders one page at a time from a
 * small index, so a 10,000-case run opens at once; a case's transcript is in its chunk file,
 * loaded only when the case is opened. No framework; Chart.js and tablesort are vendored
 * (static/vendor/README.md).
 */
"use strict";
var TB = window.TB || {};
window.TB = TB;
TB.PAGE = 50;
TB.data = {};      // run key -> {n, chunk, rows}
TB.chunks = {};    // "key/k" -> [case payloads]
TB.waiting = {};   // "key/k" -> [callbacks]

TB.el = function (tag, attrs, children) {
  var e = document.createElement(tag);
  if (attrs) {
    Object.keys(attrs).forEach(function (k) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "cls") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
  }
  (children || []).forEach(function (c) {
    if (c === null || c === undefined) return;
    e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  });
  return e;
};

/* ---------------------------------------------------------------- data files */
TB.index = function (key, n, chunk, rows) {
  TB.data[key] = {n: n, chunk: chunk, rows: rows};
  var list = document.getElementById("case-list");
  if (list && list.getAttribute("data-run") === key) TB.caseList(list, key);
};

/* A chunk stores each distinct long text once, in `texts`; a string value "\0" + n stands for
 * texts[n], and one that really began with "\0" arrives with it doubled (view/case_data.py
 * share_texts). Values are replaced in place: keys are never references. */
TB.unshare = function (v, texts) {
  if (typeof v === "string") {
    if (v.charCodeAt(0) !== 0) return v;
    return v.charCodeAt(1) === 0 ? v.slice(1) : texts[parseInt(v.slice(1), 10)];
  }
  if (v !== null && typeof v === "object") {
    Object.keys(v).forEach(function (key) { v[key] = TB.unshare(v[key], texts); });
  }
  return v;
};

TB.chunk = function (key, k, cases, texts) {
  var id = key + "/" + k;
  if (texts) cases = TB.unshare(cases, texts);  // null: a chunk too deep to share, written whole
  TB.chunks[id] = cases;
  (TB.waiting[id] || []).forEach(function (cb) { cb(cases); });
  delete TB.waiting[id];
};

/* A chunk file holds its [cases, texts] literal gzipped, as base64 (view/site.py pack_chunk: a
 * FamilyTool run's site was 17 times the size): unpacked here with the browser's
 * DecompressionStream, then read as the plain literal was. */
TB.chunkz = function (key, k, packed) {
  var fail = function (why) {
    var box = document.getElementById("case") || document.getElementById("case-list");
    if (box) box.textContent = "Cannot read the case data of " + key + " (" + why + ")";
  };
  if (typeof DecompressionStream === "undefined") {
    fail("this browser cannot unpack it: DecompressionStream came with Chrome 80, Firefox 113 " +
         "and Safari 16.4");
    return;
  }
  var raw = atob(packed), bytes = new Uint8Array(raw.length);
  for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  new Response(stream).text().then(function (literal) {
    var d = (new Function("return " + literal))();  // the site's own literal, as its <script> was
    TB.chunk(key, k, d[0], d[1]);
  }, function (err) { fail(String(err)); });
};

TB.loadChunk = function (key, k, cb) {
  var id = key + "/" + k;
  if (TB.chunks[id]) { cb(TB.chunks[id]); return; }
  if (TB.waiting[id]) { TB.waiting[id].push(cb); return; }
  TB.waiting[id] = [cb];
  var s = document.createElement("script");
  s.src = "data/" + encodeURIComponent(key) + "/c" + k + ".js";
  s.onerror = function () {
    var box = document.getElementById("case") || document.getElementById("case-list");
    if (box) box.textContent = "Cannot load " + s.src + " (was the site copied whole?)";
  };
  document.head.appendChild(s);
};

/* ---------------------------------------------------------------- case list */
TB.caseLink = function (key, i) { return "case.html#run=" + encodeURIComponent(key) + "&i=" + i; };

TB.caseList = function (box, key) {
  var d = TB.data[key];
  var rows = d.rows;
  var labels = {}, scenarios = {}, outcomes = {};
  rows.forEach(function (r) {
    scenarios[r.b + "/" + r.s] = 1;
    outcomes[r.o] = (outcomes[r.o] || 0) + 1;
    Object.keys(r.labels).forEach(function (l) {
      labels[l] = labels[l] || {};
      labels[l][r.labels[l]] = 1;
    });
  });
  var state = {page: 0, o: "", sc: "", text: "", lab: {}};
  function select(name, values, onchange, counts) {
    var s = TB.el("select", {"aria-label": name, "data-filter": name});
    s.appendChild(TB.el("option", {value: "", text: name + ": all"}));
    values.forEach(function (v) {
      s.appendChild(TB.el("option", {value: v, text: v + (counts ? " (" + counts[v] + ")" : "")}));
    });
    s.onchange = function () { onchange(s.value); state.page = 0; draw(); };
    return s;
  }
  var natural = function (a, b) { return a.localeCompare(b, undefined, {numeric: true}); };
  var bar = TB.el("div", {cls: "filters"});
  bar.appendChild(select("outcome", Object.keys(outcomes).sort(), function (v) { state.o = v; }, outcomes));
  bar.appendChild(select("scenario", Object.keys(scenarios).sort(), function (v) { state.sc = v; }));
  Object.keys(labels).sort().forEach(function (l) {
    bar.appendChild(select(l, Object.keys(labels[l]).sort(natural), function (v) { state.lab[l] = v; }));
  });
  var search = TB.el("input", {type: "search", placeholder: "search id, question, answer, failure",
                               "aria-label": "search cases", id: "case-search"});
  var timer = null;
  search.oninput = function () {
    clearTimeout(timer);
    timer = setTimeout(function () { state.text = search.value.trim().toLowerCase(); state.page = 0; draw(); }, 120);
  };
  bar.appendChild(search);
  var info = TB.el("span", {cls: "pageinfo"});
  var prev = TB.el("button", {type: "button", text: "‹ prev"});
  var next = TB.el("button", {type: "button", text: "next ›"});
  prev.onclick = function () { state.page--; draw(); };
  next.onclick = function () { state.page++; draw(); };
  var pager = TB.el("div", {cls: "pager"}, [prev, info, next]);
  var table = TB.el("table", {cls: "cases", id: "cases-table"});
  box.textContent = "";
  box.appendChild(bar);
  box.appendChild(pager);
  box.appendChild(table);

  function keep(r) {
    if (state.o && r.o !== state.o) return false;
    if (state.sc && r.b + "/" + r.s !== state.sc) return false;
    for (var l in state.lab) if (state.lab[l] && r.labels[l] !== state.lab[l]) return false;
    if (state.text && r.text.indexOf(state.text) < 0 && r.id.toLowerCase().indexOf(state.text) < 0) return false;
    return true;
  }
  function draw() {
    var shown = rows.filter(keep);
    var pages = Math.max(1, Math.ceil(shown.length / TB.PAGE));
    state.page = Math.min(Math.max(state.page, 0), pages - 1);
    var from = state.page * TB.PAGE;
    var page = shown.slice(from, from + TB.PAGE);
    info.textContent = shown.length ? (from + 1) + "–" + (from + page.length) + " of " + shown.length +
      " cases" + (shown.length < rows.length ? " (" + rows.length + " in all)" : "") : "no case matches";
    prev.disabled = state.page === 0;
    next.disabled = state.page >= pages - 1;
    table.textContent = "";
    table.appendChild(TB.el("thead", null, [TB.el("tr", null, ["case", "scenario", "outcome", "markers", "why"].map(
      function (h) { return TB.el("th", {text: h}); }))]));
    var body = TB.el("tbody");
    page.forEach(function (r) {
      var marks = Object.keys(r.labels).map(function (l) { return l + "=" + r.labels[l]; }).join(" ");
      body.appendChild(TB.el("tr", {"data-outcome": r.o}, [
        TB.el("td", {cls: "mono"}, [TB.el("a", {href: TB.caseLink(key, r.i), text: r.id})]),
        TB.el("td", {text: r.b + "/" + r.s}),
        TB.el("td", null, [TB.el("span", {cls: "badge " + r.o, text: r.o})]),
        TB.el("td", {cls: "small", text: marks}),
        TB.el("td", {cls: "small", text: r.msg})
      ]));
    });
    table.appendChild(body);
  }
  draw();
  // perf/view_load.py reads this mark: the first page of the list is on screen.
  if (window.performance && performance.mark) performance.mark("tb-cases-drawn");
};

/* ---------------------------------------------------------------- one case */
TB.hashParams = function () {
  var out = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
    var i = kv.indexOf("=");
    if (i > 0) out[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
  });
  return out;
};

TB.openCase = function () {
  var p = TB.hashParams();
  var box = document.getElementById("case");
  var run = (TB.runs || []).filter(function (r) { return r[0] === p.run; })[0];
  var i = parseInt(p.i, 10);
  if (!run || isNaN(i)) { box.textContent = "No such case: " + location.hash; return; }
  TB.loadChunk(p.run, Math.floor(i / TB.CHUNK), function (cases) {
    var c = cases.filter(function (x) { return x.i === i; })[0];
    if (!c) { box.textContent = "No case " + i + " in run " + p.run; return; }
    TB.renderCase(box, c, run);
  });
  window.onhashchange = function () { location.reload(); };
};

TB.pretty = function (v) {
  if (typeof v === "string") {
    try { var j = JSON.parse(v); if (j && typeof j === "object") return JSON.stringify(j, null, 2); } catch (e) { /* as is */ }
    return v;
  }
  return JSON.stringify(v, null, 2);
};

TB.kv = function (obj) {
  var t = TB.el("table", {cls: "facts"});
  Object.keys(obj || {}).forEach(function (k) {
    var v = obj[k];
    t.appendChild(TB.el("tr", null, [TB.el("th", {cls: "mono", text: k}),
      TB.el("td", {cls: "mono", text: typeof v === "string" ? v : JSON.stringify(v)})]));
  });
  return t;
};

TB.renderCase = function (box, c, run) {
  document.title = c.id + " · toolbench view";
  box.textContent = "";
  var key = run[0];
  box.appendChild(TB.el("p", null, [TB.el("a", {href: "run-" + key + ".html#cases", text: "← " + run[1] + " " + run[2]})]));
  box.appendChild(TB.el("h1", null, [TB.el("span", {cls: "mono", text: c.id}), " ",
    TB.el("span", {cls: "badge " + c.outcome, id: "case-outcome", text: c.outcome})]));
  var marks = Object.keys(c.labels).map(function (l) { return l + "=" + c.labels[l]; }).join(", ");
  box.appendChild(TB.el("p", {text: c.benchmark + " / " + c.scenario + " · model " + c.model +
    (marks ? " · " + marks : "") + " · " + c.model_calls + " model calls (" + c.cached_calls + " cached)" +
    (c.repeat ? " · repeat " + c.repeat : "")}));
  if (c.error) {
    box.appendChild(TB.el("div", {cls: "errors"}, [TB.el("b", {text: "infrastructure error (" + c.error.kind + "): "}),
      c.error.message + (c.error.attempts ? " (" + c.error.attempts + " attempts)" : "") +
      (c.error.hint ? "; try: " + c.error.hint : "")]));
  }
  if (c.failure) box.appendChild(TB.el("pre", {cls: "failure", text: c.failure}));
  var d = c.details || {};
  var gold = {};
  // the keys the bundled benchmarks record their gold and answer under (details of each runner)
  ["question", "gold", "gold_calls", "gold_tools", "golden_calls", "golden_links", "prediction",
   "predicted_calls", "answer_status"].forEach(function (k) {
    if (d[k] !== undefined) gold[k] = d[k];
  });
  if (Object.keys(gold).length) { box.appendChild(TB.el("h2", {text: "Gold and answer"})); box.appendChild(TB.kv(gold)); }
  box.appendChild(TB.el("h2", {text: "Values"}));
  box.appendChild(Object.keys(c.values).length ? TB.kv(c.values) : TB.el("p", {cls: "empty", text: "no values (not scored)"}));
  box.appendChild(TB.el("h2", {text: "Transcript"}));
  var names = {};
  var convo = TB.el("div", {cls: "convo", id: "transcript"});
  (c.transcript || []).forEach(function (m) {
    var role = m.role || "?";
    var msg = TB.el("div", {cls: "msg " + role});
    var head = TB.el("div", {cls: "role", text: role});
    msg.appendChild(head);
    if (role === "tool") {
      var nm = names[m.tool_call_id];
      head.textContent = "tool result" + (nm ? " of " + nm : "") + (m.tool_call_id ? " (" + m.tool_call_id + ")" : "");
      if (m.limit) msg.appendChild(TB.el("div", {cls: "limit", text: m.limit}));
    }
    if (m.content !== null && m.content !== undefined && m.content !== "") {
      msg.appendChild(TB.el("pre", {text: typeof m.content === "string" ? m.content : JSON.stringify(m.content, null, 2)}));
    }
    (m.tool_calls || []).forEach(function (tc) {
      var f = tc.function || {};
      names[tc.id] = f.name;
      msg.appendChild(TB.el("div", {cls: "call"}, [TB.el("b", {text: "calls " + (f.name || "?")}),
        TB.el("small", {cls: "mono", text: " " + (tc.id || "")}), TB.el("pre", {text: TB.pretty(f.arguments)})]));
    });
    convo.appendChild(msg);
  });
  if (!(c.transcript || []).length) convo.appendChild(TB.el("p", {cls: "empty", text: "no transcript recorded"}));
  box.appendChild(convo);
  if ((c.parse_failures || []).length) {
    box.appendChild(TB.el("h2", {text: "Parse failures (" + c.parse_failures.length + ")"}));
    box.appendChild(TB.el("pre", {cls: "failure", text: JSON.stringify(c.parse_failures, null, 2)}));
  }
  var det = TB.el("details", null, [TB.el("summary", {text: "all details"}), TB.el("pre", {text: JSON.stringify(d, null, 2)})]);
  box.appendChild(det);
  box.appendChild(TB.el("p", {cls: "small", text: "tokens: " + JSON.stringify(c.usage) + " · latency " + c.latency_s + " s" +
    (c.wall_s == null ? "" : " · ran " + c.wall_s.toFixed(2) + " s") +
    (c.started_at == null ? "" : " from " + new Date(c.started_at * 1000).toISOString().slice(11, 23) + " UTC")}));
};

/* ---------------------------------------------------------------- leaderboard */
TB.compareSelected = function () {
  var picked = Array.prototype.slice.call(document.querySelectorAll("input.pick:checked")).map(function (e) { return e.value; });
  var msg = document.getElementById("compare-msg");
  if (picked.length !== 2) { msg.textContent = "tick exactly two runs (" + picked.length + " ticked)"; return; }
  var hit = TB.pairs[picked[0] + "|" + picked[1]] || TB.pairs[picked[1] + "|" + picked[0]];
  if (!hit) { msg.textContent = "these two runs were not compared"; return; }
  if (/\.html$/.test(hit)) { location.href = hit; return; }
  msg.textContent = hit;
};

/* ---------------------------------------------------------------- plots */
// CI whiskers over each bar (Chart.js has no error bars of its own).
TB.whiskers = {
  id: "tbWhiskers",
  afterDatasetsDraw: function (chart) {
    var ctx = chart.ctx, y = chart.scales.y;
    chart.data.datasets.forEach(function (ds, i) {
      var meta = chart.getDatasetMeta(i);
      if (meta.hidden) return;
      meta.data.forEach(function (bar, j) {
        var lo = ds.low[j], hi = ds.high[j];
        if (lo === null || hi === null || lo === undefined) return;
        ctx.save();
        ctx.strokeStyle = "#222";
        ctx.beginPath();
        ctx.moveTo(bar.x, y.getPixelForValue(lo)); ctx.lineTo(bar.x, y.getPixelForValue(hi));
        ctx.moveTo(bar.x - 3, y.getPixelForValue(lo)); ctx.lineTo(bar.x + 3, y.getPixelForValue(lo));
        ctx.moveTo(bar.x - 3, y.getPixelForValue(hi)); ctx.lineTo(bar.x + 3, y.getPixelForValue(hi));
        ctx.stroke();
        ctx.restore();
      });
    });
  }
};

TB.COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"];

TB.plots = function () {
  if (!window.Chart) return;
  document.querySelectorAll("canvas[data-plot]").forEach(function (cv) {
    var spec;
    try { spec = JSON.parse(cv.getAttribute("data-plot")); } catch (e) { return; }  // a NaN bound: table only
    var rate = spec.series.every(function (s) { return s.rate; });
    new window.Chart(cv, {
      type: "bar",
      data: {labels: spec.groups, datasets: spec.series.map(function (s, i) {
        return {label: s.metric, data: s.values, low: s.low, high: s.high, backgroundColor: TB.COLORS[i % TB.COLORS.length]};
      })},
      options: {animation: false, responsive: true, maintainAspectRatio: false,
        plugins: {title: {display: true, text: "by " + spec.label + (rate ? " (%, 95% CI)" : " (95% CI)")}},
        scales: {y: rate ? {min: 0, max: 100} : {beginAtZero: true}}},
      plugins: [TB.whiskers]
    });
  });
};
