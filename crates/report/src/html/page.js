"use strict";
// The viewer: every view is computed here from the embedded data (see html/data.rs) for the
// selected time window, so selecting a range on the timeline redraws them all.
(function () {
  var D = JSON.parse(document.getElementById("kprof-data").textContent);
  var $ = function (id) { return document.getElementById(id); };
  var NEV = D.events.length;
  // A capture of timed calls and lock waits only (`run --no-sample`) has no sample views.
  var SAMPLED = NEV > 0;
  var TREE_MIN = 0.1, TREE_OPEN = 5, PAGE = 100, HOT_LINES = 50, THREADS_SHOWN = 8;
  // What the counts are: samples, or blocked ns for `report --off-cpu` (html.rs Options::unit).
  var UNIT = D.unit || "samples";
  // Blocked ns read better as ms in a narrow column.
  function fmtSelf(v) { return D.unit ? (v / 1e6).toFixed(1) : v; }

  // Varint arrays: base64 of LEB128 (html/pack.rs).
  function unpack(b64, n, signed) {
    var bin = atob(b64), out = new Float64Array(n), k = 0, v = 0, mul = 1;
    for (var i = 0; i < bin.length; i++) {
      var b = bin.charCodeAt(i);
      v += (b & 0x7f) * mul;
      if (b & 0x80) { mul *= 128; continue; }
      out[k++] = signed ? (v % 2 ? -(v + 1) / 2 : v / 2) : v;
      v = 0; mul = 1;
    }
    return out;
  }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function pct(a, b) { return b > 0 ? a * 100 / b : 0; }
  function fmtPct(a, b) { return pct(a, b).toFixed(2) + "%"; }
  // ns as seconds with all nine decimals, the form `kprofctl report --time` takes.
  function secs(ns) {
    var s = Math.floor(ns / 1e9), f = String(ns - s * 1e9);
    return s + "." + "000000000".slice(f.length) + f;
  }
  function parseSecs(text) {
    var m = /^(\d*)(?:\.(\d{0,9}))?$/.exec(text);
    if (!m) return null;
    return (parseInt(m[1] || "0", 10) * 1e9) + parseInt(((m[2] || "") + "000000000").slice(0, 9), 10);
  }

  // ---- tables of the profile ----
  var F = D.functions, NF = F.name.length;
  var fnImage = unpack(F.image, NF);
  var S = D.stacks, NS = S.n;
  var stNode = unpack(S.node, NS, true), stThread = unpack(S.thread, NS, true);
  var stSelf = unpack(S.self, NS, true), stLine = unpack(S.line, NS, true);
  var stSrc = unpack(S.src, NS, true), stAsm = unpack(S.asm, NS, true);
  var stCounts = S.counts.map(function (c) { return unpack(c, NS); });
  var NN = D.nodes.n, up = unpack(D.nodes.up, NN), nodeKey = unpack(D.nodes.key, NN);
  var parent = new Int32Array(NN);
  for (var i = 1; i < NN; i++) parent[i] = i - up[i];
  var stIdle = new Uint8Array(NS), idleSamples = 0;
  for (var s = 0; s < NS; s++) {
    var th = D.threads[stThread[s]];
    if (th && th[0] === 0) { stIdle[s] = 1; idleSamples += SAMPLED ? stCounts[0][s] : 0; }
  }
  var NL = D.lines.file.length, lineNo = unpack(D.lines.line, NL), lineFn = unpack(D.lines["function"], NL);
  function fnName(f) { return f >= 0 ? F.name[f] : "[unknown]"; }
  function fnImg(f) { var i = D.images[fnImage[f]]; return i ? i[0] : "[unknown]"; }
  function fnKind(f) { var i = D.images[fnImage[f]]; return i ? i[1] : "user"; }

  // ---- time bins ----
  var T = D.time, NB = T.count || 0, W = T.width || 1;
  var binRuns = T.events.map(function (e) {
    var bins = unpack(e.bin, e.n), st = unpack(e.stack, e.n), cnt = unpack(e.count, e.n);
    var b = 0, k = 0;
    for (var i = 0; i < e.n; i++) {
      if (bins[i] !== 0) { b += bins[i]; k = 0; }
      k += st[i]; bins[i] = b; st[i] = k;
    }
    return { bin: bins, stack: st, count: cnt, n: e.n };
  });

  // ---- state: window in bins [b0, b1), idle shown, kept in the URL fragment ----
  var state = { b0: 0, b1: NB, idle: false, tab: "functions", sort: null, asc: false, ratio: null };
  function whole() { return state.b0 <= 0 && state.b1 >= NB; }
  function readHash() {
    var h = window.location.hash.replace(/^#/, "");
    h.split("&").forEach(function (kv) {
      var at = kv.indexOf("="), k = at < 0 ? kv : kv.slice(0, at), v = at < 0 ? "" : decodeURIComponent(kv.slice(at + 1));
      if (k === "window" && NB > 0) {
        var parts = v.split("..");
        var a = parts[0] ? parseSecs(parts[0]) : 0, b = parts[1] ? parseSecs(parts[1]) : NB * W;
        if (a !== null && b !== null && b > a) {
          state.b0 = Math.max(0, Math.min(NB - 1, Math.floor(a / W)));
          state.b1 = Math.max(state.b0 + 1, Math.min(NB, Math.ceil(b / W)));
        }
      } else if (k === "ratio" && v === "none") {
        state.ratio = null;
      } else if (k === "ratio") {
        var ab = v.split("/").map(function (x) { return parseInt(x, 10); });
        if (ab.length === 2 && ab[0] < NEV && ab[1] < NEV && ab[0] !== ab[1]) state.ratio = ab;
      } else if (k === "idle") {
        state.idle = v !== "0";
      } else if (k === "tab" && $(v) && $(v).classList.contains("pane")) {
        state.tab = v;
      } else if (k === "sort") {
        var m = /^(\d+)(:asc)?$/.exec(v);
        if (m) { state.sort = parseInt(m[1], 10); state.asc = !!m[2]; }
      }
    });
  }
  function writeHash() {
    var parts = [];
    if (!whole()) parts.push("window=" + secs(state.b0 * W) + ".." + secs(state.b1 * W));
    if (state.idle) parts.push("idle=1");
    if (state.ratio) parts.push("ratio=" + state.ratio.join("/"));
    else if (D.ratio) parts.push("ratio=none");
    if (state.tab !== "functions") parts.push("tab=" + state.tab);
    if (state.sort !== null) parts.push("sort=" + state.sort + (state.asc ? ":asc" : ""));
    var h = parts.length ? "#" + parts.join("&") : "";
    if (h !== window.location.hash && !(h === "" && window.location.hash === "")) {
      history.replaceState(null, "", h || window.location.pathname + window.location.search);
    }
  }

  // Per-stack samples of every event in the window, the idle loop zeroed unless shown.
  var C = null, totals = null;
  function computeCounts() {
    C = [];
    for (var e = 0; e < NEV; e++) {
      var c;
      if (whole() || !binRuns[e]) {
        c = Float64Array.from(stCounts[e]);
      } else {
        c = new Float64Array(NS);
        var r = binRuns[e];
        for (var i = 0; i < r.n; i++) {
          var b = r.bin[i];
          if (b >= state.b0 && b < state.b1) c[r.stack[i]] += r.count[i];
        }
      }
      if (!state.idle) for (var s = 0; s < NS; s++) if (stIdle[s]) c[s] = 0;
      C.push(c);
    }
    totals = C.map(function (c) { var t = 0; for (var s = 0; s < NS; s++) t += c[s]; return t; });
  }

  // ---- functions table ----
  var fnRows = [], fnPage = 0, fnSelf = null, fnTotal = null;
  function computeFunctions() {
    fnSelf = []; fnTotal = [];
    for (var e = 0; e < NEV; e++) { fnSelf.push(new Float64Array(NF)); fnTotal.push(new Float64Array(NF)); }
    var stamp = new Int32Array(NF);
    for (var s = 0; s < NS; s++) {
      var any = false;
      for (var e2 = 0; e2 < NEV; e2++) if (C[e2][s] > 0) { any = true; break; }
      if (!any) continue;
      if (stSelf[s] >= 0) for (e2 = 0; e2 < NEV; e2++) fnSelf[e2][stSelf[s]] += C[e2][s];
      // Total: once per stack, whatever the recursion.
      for (var n = stNode[s]; parent[n] !== 0 && n !== 0; n = parent[n]) {
        var f = Math.floor(nodeKey[n] / 2);
        if (stamp[f] === s + 1) continue;
        stamp[f] = s + 1;
        for (e2 = 0; e2 < NEV; e2++) fnTotal[e2][f] += C[e2][s];
      }
    }
    fnRows = [];
    for (var f2 = 0; f2 < NF; f2++) {
      var t = 0;
      for (e = 0; e < NEV; e++) t += fnTotal[e][f2] + fnSelf[e][f2];
      if (t > 0) fnRows.push(f2);
    }
    // The text report's order: self samples of the first event, then total.
    fnRows.sort(function (a, b) {
      return (fnSelf[0][b] - fnSelf[0][a]) || (fnTotal[0][b] - fnTotal[0][a]) || (a - b);
    });
    fnRows.forEach(function (f, i) { rank[f] = i + 1; });
  }
  if (D.unit) $("fn-note").textContent = "Self: " + UNIT + " in the function itself, shown as ms. Total: with the function anywhere on the call stack. Click a header to sort.";
  var rank = new Int32Array(NF);
  var fnColumns = (function () {
    var cols = [
      { head: "#", cls: "n", w: "52px", v: function (f) { return rank[f]; }, t: function (f) { return rank[f]; } },
      { head: "Function", cls: "fn", share: 0.45, v: function (f) { return fnName(f).toLowerCase(); }, t: function (f) { return fnName(f); } },
      { head: "Image", cls: "fn", share: 0.2, v: function (f) { return fnImg(f).toLowerCase(); }, t: function (f) { return fnImg(f); } }
    ];
    D.events.forEach(function (ev, e) {
      cols.push({ head: ev.name + (D.unit ? " self ms" : " self"), cls: "n", w: "92px", v: function (f) { return fnSelf[e][f]; }, t: function (f) { return fmtSelf(fnSelf[e][f]); } });
      cols.push({ head: ev.name + " self %", cls: "n", w: "92px", v: function (f) { return fnSelf[e][f]; }, t: function (f) { return fmtPct(fnSelf[e][f], totals[e]); } });
      cols.push({ head: ev.name + " total %", cls: "n", w: "92px", v: function (f) { return fnTotal[e][f]; }, t: function (f) { return fmtPct(fnTotal[e][f], totals[e]); } });
    });
    cols.push({ head: "Share", cls: "bar", w: "80px", v: function (f) { return fnSelf[0][f]; }, html: function (f) {
      return "<div class=\"bar\"><span style=\"width:" + Math.min(100, pct(fnSelf[0][f], totals[0])).toFixed(1) + "%\"></span></div>";
    } });
    cols.push({ head: "Source", cls: "path", share: 0.35, v: function (f) { return F.src[f].toLowerCase(); }, t: function (f) { return F.src[f]; } });
    return cols;
  })();
  (function () {
    sizeColumns();
    var tr = document.createElement("tr");
    fnColumns.forEach(function (c, i) {
      var th = document.createElement("th");
      th.className = c.cls;
      th.textContent = c.head;
      th.title = c.head + " (click to sort)";
      th.addEventListener("click", function () {
        if (state.sort === i) state.asc = !state.asc; else { state.sort = i; state.asc = i === 1 || i === 2 || c.cls === "path"; }
        fnPage = 0; writeHash(); renderFunctions();
      });
      tr.appendChild(th);
    });
    $("functions-table").tHead.appendChild(tr);
    $("fn-filter").addEventListener("input", function () { fnPage = 0; renderFunctions(); });
    $("fn-prev").addEventListener("click", function () { fnPage = Math.max(0, fnPage - 1); renderFunctions(); });
    $("fn-next").addEventListener("click", function () { fnPage++; renderFunctions(); });
  })();
  // Fixed columns in px; what is left is shared by name, image and source, so the table
  // fits its pane with any number of events.
  function sizeColumns() {
    var avail = $("functions").clientWidth || document.body.clientWidth - 40, fixed = 0;
    fnColumns.forEach(function (c) { if (c.w) fixed += parseInt(c.w, 10); });
    var rest = Math.max(300, avail - fixed - 2);
    $("fn-cols").innerHTML = fnColumns.map(function (c) {
      return "<col style=\"width:" + (c.w || Math.floor(rest * c.share) + "px") + "\">";
    }).join("");
  }
  function renderFunctions() {
    var rows = fnRows;
    var q = $("fn-filter").value.toLowerCase();
    if (q) rows = rows.filter(function (f) {
      return (fnName(f) + " " + fnImg(f) + " " + F.src[f]).toLowerCase().indexOf(q) >= 0;
    });
    if (state.sort !== null && fnColumns[state.sort]) {
      var col = fnColumns[state.sort], asc = state.asc;
      rows = rows.slice().sort(function (a, b) {
        var x = col.v(a), y = col.v(b);
        var c = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
        return (asc ? c : -c) || rank[a] - rank[b];
      });
    }
    Array.prototype.forEach.call($("functions-table").tHead.rows[0].cells, function (th, i) {
      th.classList.toggle("asc", state.sort === i && state.asc);
      th.classList.toggle("desc", state.sort === i && !state.asc);
    });
    var pages = Math.max(1, Math.ceil(rows.length / PAGE));
    fnPage = Math.min(fnPage, pages - 1);
    var html = [];
    rows.slice(fnPage * PAGE, fnPage * PAGE + PAGE).forEach(function (f) {
      html.push("<tr>");
      fnColumns.forEach(function (c) {
        if (c.html) { html.push("<td class=\"bar\">" + c.html(f) + "</td>"); return; }
        var t = esc(c.t(f));
        // Paths end in an ellipsis on the left, so file:line stays visible.
        if (c.cls === "path") t = "<bdi>" + t + "</bdi>";
        html.push("<td class=\"" + c.cls + "\"" + (c.cls === "n" ? "" : " title=\"" + esc(c.t(f)) + "\"") + ">" + t + "</td>");
      });
      html.push("</tr>");
    });
    $("functions-table").tBodies[0].innerHTML = html.join("");
    $("fn-count").textContent = rows.length + (q ? " matching" : "") + " functions";
    $("fn-page").textContent = "page " + (fnPage + 1) + " of " + pages;
    $("fn-prev").disabled = fnPage === 0;
    $("fn-next").disabled = fnPage >= pages - 1;
  }

  // ---- call tree: counts per trie node ----
  var kidStart = new Int32Array(NN + 1), kids = new Int32Array(Math.max(0, NN - 1));
  (function () {
    for (var i = 1; i < NN; i++) kidStart[parent[i] + 1]++;
    for (i = 0; i < NN; i++) kidStart[i + 1] += kidStart[i];
    var fill = kidStart.slice(0, NN);
    for (i = 1; i < NN; i++) kids[fill[parent[i]]++] = i;
  })();
  var nodeCount = null, nodeSelf = null;
  function computeNodes() {
    nodeCount = []; nodeSelf = [];
    for (var e = 0; e < NEV; e++) {
      var n = new Float64Array(NN), own = new Float64Array(NN);
      for (var s = 0; s < NS; s++) if (C[e][s]) { n[stNode[s]] += C[e][s]; own[stNode[s]] += C[e][s]; }
      for (var i = NN - 1; i > 0; i--) n[parent[i]] += n[i];
      nodeCount.push(n); nodeSelf.push(own);
    }
  }
  function nodeFn(n) { return parent[n] === 0 ? -1 : Math.floor(nodeKey[n] / 2); }
  function nodeLabel(n) {
    if (parent[n] === 0) return D.comms[nodeKey[n]] || "[unknown]";
    return fnName(nodeFn(n));
  }
  function sortedKids(n, e) {
    var out = [];
    for (var k = kidStart[n]; k < kidStart[n + 1]; k++) if (nodeCount[e][kids[k]] > 0) out.push(kids[k]);
    out.sort(function (a, b) { return nodeCount[e][b] - nodeCount[e][a] || a - b; });
    return out;
  }
  function treeItem(n) {
    var c0 = nodeCount[0][n], share = pct(c0, totals[0]);
    var label = "<span class=\"pct\">" + share.toFixed(2) + "%</span><span class=\"cnt\">" + c0 + "</span>";
    if (parent[n] === 0) label += "<b>" + esc(nodeLabel(n)) + "</b>";
    else {
      label += esc(nodeLabel(n)) + " <span class=\"img\">" + esc(fnImg(nodeFn(n))) + "</span>";
      if (nodeKey[n] % 2) label += " <span class=\"inl\">inlined</span>";
    }
    var hasKids = sortedKids(n, 0).length > 0;
    if (nodeSelf[0][n] > 0 && hasKids) label += " <span class=\"self\">(self " + nodeSelf[0][n] + ")</span>";
    for (var e = 1; e < NEV; e++) label += " <span class=\"self\">" + esc(D.events[e].name) + ": " + fmtPct(nodeCount[e][n], totals[e]) + "</span>";
    if (!hasKids) { var d = document.createElement("div"); d.className = "leaf"; d.innerHTML = label; return d; }
    var det = document.createElement("details");
    det.innerHTML = "<summary>" + label + "</summary>";
    det.addEventListener("toggle", function () { if (det.open && !det.filled) fillTree(det, n, false); });
    if (share >= TREE_OPEN) det.open = true;
    return det;
  }
  var treeBudget = 0;
  function fillTree(el, n, all) {
    el.filled = true;
    var folded = 0, foldedCount = 0;
    sortedKids(n, 0).forEach(function (k) {
      var shown = false;
      for (var e = 0; e < NEV; e++) if (pct(nodeCount[e][k], totals[e]) >= TREE_MIN) shown = true;
      if (!shown) { folded++; foldedCount += nodeCount[0][k]; return; }
      var item = treeItem(k);
      el.appendChild(item);
      if (item.tagName === "DETAILS" && (item.open || (all && treeBudget-- > 0))) { item.open = true; fillTree(item, k, all); }
    });
    if (folded) {
      var d = document.createElement("div");
      d.className = "leaf note";
      d.textContent = folded + " smaller path(s), " + foldedCount + " " + UNIT;
      el.appendChild(d);
    }
  }
  function renderTree(all) {
    var box = $("tree");
    box.innerHTML = "";
    treeBudget = all ? 3000 : 0;
    fillTree(box, 0, all);
    $("tree-note").textContent = "Top-down, per command; percentages of the " + totals[0] + " " + UNIT + " of " +
      D.events[0].name + " in view. Paths under " + TREE_MIN + "% of every event are folded.";
  }
  document.querySelectorAll("button[data-tree]").forEach(function (b) {
    b.addEventListener("click", function () { renderTree(b.getAttribute("data-tree") === "open"); });
  });

  // ---- flamegraph: drawn from the trie ----
  var flame = { event: 0, zoom: 0, rects: [], search: "" };
  (function () {
    var sel = $("flame-event");
    D.events.forEach(function (ev, e) { var o = document.createElement("option"); o.value = e; o.textContent = ev.name; sel.appendChild(o); });
    if (NEV < 2) $("flame-event-label").hidden = true;
    sel.addEventListener("change", function () { flame.event = parseInt(sel.value, 10); flame.zoom = 0; drawFlame(); });
    $("flame-search").addEventListener("input", function () { flame.search = $("flame-search").value.toLowerCase(); drawFlame(); });
    $("flame-reset").addEventListener("click", function () { flame.zoom = 0; drawFlame(); });
  })();
  var KIND_HUE = { kernel: [28, 90], module: [275, 55], user: [4, 75] };
  function frameColour(n) {
    if (parent[n] === 0) return "#c8c8c8";
    var f = nodeFn(n);
    if (nodeKey[n] % 2) return "hsl(180," + (45 + f % 20) + "%," + (55 + f % 15) + "%)";
    var h = KIND_HUE[fnKind(f)] || KIND_HUE.user;
    return "hsl(" + (h[0] + f % 17) + "," + h[1] + "%," + (52 + (f * 7) % 18) + "%)";
  }
  function drawFlame() {
    var cv = $("flame"), box = $("flame-box"), e = flame.event, counts = nodeCount[e];
    var width = Math.max(300, box.clientWidth), ROW = 17;
    var rects = [], maxDepth = 0, matched = 0;
    var root = flame.zoom, rootCount = counts[root];
    // The path from the root down to the zoomed node stays drawn, full width.
    var chain = [];
    for (var n = root; n !== 0; n = parent[n]) chain.unshift(n);
    chain.forEach(function (c, d) { rects.push([0, d, width, c]); });
    var base = chain.length;
    function lay(n, x, depth) {
      var w = rootCount > 0 ? counts[n] / rootCount * width : 0;
      if (w < 0.4) return;
      if (n !== root || root === 0) { if (n !== 0) rects.push([x, depth, w, n]); }
      if (depth > maxDepth) maxDepth = depth;
      var ks = sortedKids(n, e), cx = x;
      for (var i = 0; i < ks.length; i++) { lay(ks[i], cx, depth + 1); cx += counts[ks[i]] / rootCount * width; }
    }
    lay(root, 0, root === 0 ? -1 : base - 1);
    maxDepth = Math.max(maxDepth, base - 1);
    var height = (maxDepth + 1) * ROW + 4;
    var dpr = window.devicePixelRatio || 1;
    cv.width = width * dpr; cv.height = height * dpr;
    cv.style.width = width + "px"; cv.style.height = height + "px";
    var g = cv.getContext("2d");
    g.scale(dpr, dpr);
    g.font = "11px ui-monospace, 'DejaVu Sans Mono', monospace";
    g.textBaseline = "middle";
    rects.forEach(function (r) {
      // Icicle: roots on the top row, where the pane starts (a tall graph drawn from the
      // bottom opened on empty canvas with its roots below the fold).
      var y = 2 + r[1] * ROW, name = nodeLabel(r[3]);
      var hit = flame.search && name.toLowerCase().indexOf(flame.search) >= 0;
      g.fillStyle = hit ? "#e040fb" : frameColour(r[3]);
      g.fillRect(r[0], y, Math.max(0.5, r[2] - 0.5), ROW - 1);
      if (r[2] > 30) {
        g.fillStyle = "#111";
        g.save(); g.beginPath(); g.rect(r[0], y, r[2] - 2, ROW); g.clip();
        g.fillText(name, r[0] + 3, y + ROW / 2);
        g.restore();
      }
    });
    if (flame.search) {
      // Matched share: samples under the outermost matching frames.
      var seen = new Uint8Array(NN);
      rects.forEach(function (r) {
        var n2 = r[3];
        if (nodeLabel(n2).toLowerCase().indexOf(flame.search) < 0) return;
        for (var a = parent[n2]; a !== 0; a = parent[a]) if (seen[a]) return;
        seen[n2] = 1; matched += counts[n2];
      });
    }
    flame.rects = rects; flame.height = height; flame.row = ROW;
    $("flame-note").textContent = (flame.search ? "matched " + fmtPct(matched, totals[e]) + " · " : "") +
      (root ? "zoomed to " + nodeLabel(root) : totals[e] + " " + UNIT + " of " + D.events[e].name);
  }
  function flameHit(ev) {
    var r0 = $("flame").getBoundingClientRect(), x = ev.clientX - r0.left, y = ev.clientY - r0.top;
    var depth = Math.floor((y - 2) / flame.row);
    for (var i = 0; i < flame.rects.length; i++) {
      var r = flame.rects[i];
      if (r[1] === depth && x >= r[0] && x < r[0] + r[2]) return r[3];
    }
    return -1;
  }
  $("flame").addEventListener("click", function (ev) { var n = flameHit(ev); if (n > 0) { flame.zoom = n === flame.zoom ? 0 : n; drawFlame(); } });
  $("flame").addEventListener("mousemove", function (ev) {
    var n = flameHit(ev), tip = $("flame-tip");
    if (n <= 0) { tip.hidden = true; return; }
    var e = flame.event;
    tip.textContent = nodeLabel(n) + (parent[n] === 0 ? "" : " (" + fnImg(nodeFn(n)) + ")") + " — " + nodeCount[e][n] + " " + UNIT + ", " + fmtPct(nodeCount[e][n], totals[e]);
    tip.hidden = false;
    var box = $("flame-box").getBoundingClientRect();
    tip.style.left = Math.min(ev.clientX - box.left + 12, box.width - tip.offsetWidth - 4) + "px";
    tip.style.top = (ev.clientY - box.top + 14) + "px";
  });
  $("flame").addEventListener("mouseleave", function () { $("flame-tip").hidden = true; });

  // ---- source: the annotated function and the hottest lines ----
  function renderSource() {
    var A = D.annotation, box = $("annotation");
    if (!A) {
      box.innerHTML = "<p class=\"note\">No function was annotated for this page (<code>kprofctl report --annotate FUNC --format html</code>).</p>";
    } else {
      var e = Math.min(A.event, NEV - 1), src = new Float64Array(A.source.length), asm = new Float64Array(A.asm.length), total = 0;
      for (var s = 0; s < NS; s++) {
        var c = C[e][s];
        if (!c) continue;
        if (stSrc[s] >= 0) src[stSrc[s]] += c;
        if (stAsm[s] >= 0) asm[stAsm[s]] += c;
        if (A.fn != null ? stSelf[s] === A.fn : (stSrc[s] >= 0 || stAsm[s] >= 0)) total += c;
      }
      var html = ["<h3><code>" + esc(A["function"]) + "</code></h3><p class=\"meta\">" + total + " " + UNIT + " of " +
        esc(D.events[e].name) + " in the function itself" + (whole() ? "" : " in the selected window") + "; percentages of those.</p>"];
      A.notes.forEach(function (n) { html.push("<p class=\"note\">" + esc(n) + "</p>"); });
      [["Source lines", A.source, src], ["Disassembly", A.asm, asm]].forEach(function (part) {
        if (!part[1].length) return;
        var max = 0;
        part[2].forEach(function (v) { if (v > max) max = v; });
        html.push("<h4>" + part[0] + "</h4><div class=\"scroll\"><table class=\"listing\"><thead><tr><th class=\"n\">" + UNIT + "</th><th class=\"n\">%</th><th class=\"n\">line</th><th>code</th></tr></thead><tbody>");
        part[1].forEach(function (row, i) {
          if (row[0]) { html.push("<tr class=\"file\"><td></td><td></td><td></td><td>" + esc(row[2]) + "</td></tr>"); return; }
          var n = part[2][i], cls = max > 0 && n * 2 >= max ? " class=\"hot\"" : n > 0 ? " class=\"warm\"" : "";
          html.push("<tr" + cls + "><td class=\"n\">" + (n || "") + "</td><td class=\"n\">" + (n ? fmtPct(n, total) : "") +
            "</td><td class=\"lbl\">" + esc(row[1]) + "</td><td>" + esc(row[2]) + "</td></tr>");
        });
        html.push("</tbody></table></div>");
      });
      box.innerHTML = html.join("");
    }
    var lines = [];
    var per = D.events.map(function () { return new Float64Array(NL); });
    for (var s2 = 0; s2 < NS; s2++) if (stLine[s2] >= 0) for (var e2 = 0; e2 < NEV; e2++) per[e2][stLine[s2]] += C[e2][s2];
    for (var l = 0; l < NL; l++) if (per[0][l] > 0) lines.push(l);
    lines.sort(function (a, b) { return per[0][b] - per[0][a] || a - b; });
    lines = lines.slice(0, HOT_LINES);
    var body = lines.map(function (l) {
      var cells = "<td class=\"path\" title=\"" + esc(D.lines.file[l] + ":" + lineNo[l]) + "\"><bdi>" + esc(D.lines.file[l] + ":" + lineNo[l]) + "</bdi></td><td class=\"fn\" title=\"" +
        esc(fnName(lineFn[l])) + "\">" + esc(fnName(lineFn[l])) + "</td><td class=\"fn\">" + esc(fnImg(lineFn[l])) + "</td>";
      for (var e3 = 0; e3 < NEV; e3++) cells += "<td class=\"n\">" + per[e3][l] + "</td><td class=\"n\">" + fmtPct(per[e3][l], totals[e3]) + "</td>";
      return "<tr>" + cells + "</tr>";
    });
    $("lines-table").tBodies[0].innerHTML = body.length ? body.join("") :
      "<tr><td colspan=\"" + (3 + 2 * NEV) + "\" class=\"note\">No sample in view has a source line: no symbol file with DWARF line tables matched (see Images).</td></tr>";
  }
  (function () {
    var heads = ["Source line", "Function", "Image"], widths = ["auto", "28%", "12%"];
    D.events.forEach(function (ev) { heads.push(ev.name + " " + UNIT, ev.name + " %"); widths.push("100px", "80px"); });
    $("lines-cols").innerHTML = widths.map(function (w) { return "<col style=\"width:" + w + "\">"; }).join("");
    $("lines-table").tHead.innerHTML = "<tr>" + heads.map(function (h, i) { return "<th" + (i > 2 ? " class=\"n\"" : "") + ">" + esc(h) + "</th>"; }).join("") + "</tr>";
  })();

  // ---- timeline ----
  var tl = { plotLeft: 0, plotWidth: 0, drag: null };
  function comm(i) { return D.comms[i] || "?"; }
  function commColour(i, light) {
    var h = (i * 137.508) % 360;
    return "hsl(" + h.toFixed(0) + ",62%," + (light ? 78 : 52) + "%)";
  }
  function decodeTrack(t, fields) {
    var out = {}, b = unpack(t.bin, t.n), acc = 0;
    for (var i = 0; i < t.n; i++) { acc += b[i]; b[i] = acc; }
    out.bin = b;
    fields.forEach(function (f) { out[f[0]] = unpack(t[f[0]], t.n, f[1]); });
    return out;
  }
  var cpuTracks = T.cpus.map(function (c) { var d = decodeTrack(c, [["comm", true], ["busy"], ["all"]]); d.cpu = c.cpu; return d; });
  var threadTracks = T.threads.map(function (t) { var d = decodeTrack(t, [["count"]]); d.thread = t.thread; return d; });
  // Blocked ns per bin and state (html/blocked.rs), on the same tracks; a thread that only
  // blocked gets a track of its own.
  var BLOCKED = D.blocked || [];
  (function () {
    if (!BLOCKED.length) return;
    var byThread = {}, samples = 0, blockedAll = 0;
    threadTracks.forEach(function (t) { byThread[t.thread] = t; t.samples = 0; for (var i = 0; i < t.count.length; i++) t.samples += t.count[i]; samples += t.samples; });
    BLOCKED.forEach(function (b) {
      var d = decodeTrack(b, [["s"], ["d"]]), t = byThread[b.thread];
      if (!t) { t = { bin: new Float64Array(0), count: new Float64Array(0), thread: b.thread, samples: 0 }; byThread[b.thread] = t; threadTracks.push(t); }
      t.blocked = d;
      t.blockedS = 0; t.blockedD = 0;
      for (var i = 0; i < d.bin.length; i++) { t.blockedS += d.s[i]; t.blockedD += d.d[i]; }
      blockedAll += t.blockedS + t.blockedD;
    });
    // The profiled command's threads first (a system-wide capture's busier neighbours must not
    // push them out of the shown tracks), then busiest or most blocked first: the larger of a
    // thread's share of the samples and of the blocked time.
    var share = function (t) { return Math.max(samples ? t.samples / samples : 0, blockedAll && t.blocked ? (t.blockedS + t.blockedD) / blockedAll : 0); };
    var workload = function (t) { var th = D.threads[t.thread]; return D.workload_pid != null && th && th[0] === D.workload_pid ? 1 : 0; };
    threadTracks.sort(function (a, b) { return workload(b) - workload(a) || share(b) - share(a) || a.thread - b.thread; });
  })();
  var THREAD_H = BLOCKED.length ? 20 : 14, BLOCKED_H = 6, BLOCKED_S = "#8c99a8", BLOCKED_D = "#1f1f1f";
  // Marks and spans of the profiled system (html/marks.js), and the Log tab.
  var MK = kprofMarks(D, { unpack: unpack, esc: esc, secs: secs, comm: comm, $: $, NB: NB, W: W, state: state,
    setWindow: function (b0, b1) { setWindow(b0, b1); } });
  // Timed calls and lock waits (html/latency.js): rows under their thread's track, the Latency tab.
  var LT = kprofLatency(D, { unpack: unpack, esc: esc, secs: secs, comm: comm, $: $, NB: NB, W: W, state: state,
    whole: function () { return whole(); } });
  function ms(ns) { return (ns / 1e6).toFixed(1); }
  var showAllThreads = false;
  function trackRow(kind, label, title, height) {
    var row = document.createElement("div");
    row.className = "track " + kind;
    row.innerHTML = "<span class=\"lbl\" title=\"" + esc(title) + "\">" + esc(label) + "</span>";
    var cv = document.createElement("canvas");
    cv.style.height = height + "px";
    row.appendChild(cv);
    return row;
  }
  function prepCanvas(cv, height) {
    var dpr = window.devicePixelRatio || 1, w = tl.plotWidth;
    cv.width = Math.max(1, Math.round(w * dpr)); cv.height = Math.round(height * dpr);
    cv.style.width = w + "px"; cv.style.height = height + "px";
    var g = cv.getContext("2d");
    g.scale(dpr, dpr);
    return g;
  }
  function binX(b) { return b / NB * tl.plotWidth; }
  function buildTimeline() {
    var box = $("tl");
    box.innerHTML = "";
    if (!NB) {
      box.innerHTML = "<p class=\"note\">This profile has no per-sample times: no timeline, and the views show the whole capture.</p>";
      return;
    }
    var rows = [];
    var axis = trackRow("axis", "time (s)", "seconds since capture start", 20);
    rows.push([axis, function (g) { drawAxis(g, 20); }, 20]);
    if (state.ratio) {
      var ra = D.events[state.ratio[0]].name, rb = D.events[state.ratio[1]].name;
      var rr = trackRow("rate ratio", ra + " / " + rb, ra + " / " + rb + ": ratio of the event counts per bin", 36);
      rows.push([rr, function (g) { drawRatio(g, 36); }, 36]);
    }
    D.events.forEach(function (ev, e) {
      var r = trackRow("rate", ev.name, ev.name + ": " + (ev.period_known ? "event count" : "samples") + " per bin of " + secs(W) + " s, all threads", 36);
      r.setAttribute("data-event", e);
      rows.push([r, function (g) { drawRate(g, e, 36); }, 36]);
    });
    cpuTracks.forEach(function (t) {
      var r = trackRow("cpu", "CPU " + t.cpu, "CPU " + t.cpu + ": coloured by the busiest command of each bin, faint when mostly idle", 14);
      r.setAttribute("data-cpu", t.cpu);
      rows.push([r, function (g) { drawCpu(g, t, 14); }, 14]);
    });
    var threads = threadTracks.filter(function (t) { var th = D.threads[t.thread]; return state.idle || !th || th[0] !== 0; });
    var shown = showAllThreads ? threads : threads.slice(0, THREADS_SHOWN);
    var max = 1, placed = {};
    var markRow = function (mt) {
      var r = trackRow("marks", MK.label(mt), MK.title(mt), MK.height(mt));
      r.setAttribute("data-mark-thread", mt.tid);
      r.setAttribute("data-ticks", mt.ticks.length);
      r.setAttribute("data-spans", mt.spans.length);
      r.tipAt = function (x, y) { return MK.at(mt, x, y, tl.plotWidth); };
      rows.push([r, function (g) { MK.draw(g, mt, tl.plotWidth); }, MK.height(mt)]);
    };
    var latPlaced = {};
    var latRow = function (lt) {
      latPlaced[lt.thread] = 1;
      var r = trackRow("latency", LT.label(lt), LT.title(lt), LT.height(lt));
      r.setAttribute("data-lat-thread", lt.thread);
      r.setAttribute("data-calls", lt.calls);
      r.setAttribute("data-waits", lt.waits);
      r.tipAt = function (x, y) { return LT.at(lt, x, y, tl.plotWidth); };
      r.clickAt = function (x, y) { return LT.extent(lt, x, y, tl.plotWidth); };
      rows.push([r, function (g) { r.setAttribute("data-drawn", LT.draw(g, lt, tl.plotWidth)); }, LT.height(lt)]);
    };
    threads.forEach(function (t) { for (var i = 0; i < t.bin.length; i++) if (t.count[i] > max) max = t.count[i]; });
    shown.forEach(function (t) {
      var th = D.threads[t.thread] || [0, 0, 0];
      var title = comm(th[2]) + " pid " + th[0] + " tid " + th[1];
      if (t.blocked) title += ": blocked " + ms(t.blockedS + t.blockedD) + " ms (S " + ms(t.blockedS) + " ms, D " + ms(t.blockedD) + " ms), the lower strip";
      var r = trackRow("thread", comm(th[2]) + " " + th[1], title, THREAD_H);
      r.setAttribute("data-thread", t.thread);
      if (t.blocked) {
        r.setAttribute("data-blocked-s-ns", t.blockedS);
        r.setAttribute("data-blocked-d-ns", t.blockedD);
      }
      rows.push([r, function (g) { drawThread(g, t, max, th[2], THREAD_H); }, THREAD_H]);
      var lt = LT.ofThread(t.thread);
      if (lt) latRow(lt);
      var mt = MK.ofThread(t.thread);
      if (mt) { placed[mt.index] = 1; markRow(mt); }
    });
    // Threads that marked or were timed but have no track shown (never sampled, or past the
    // busiest).
    var latRest = LT.others(latPlaced, showAllThreads, THREADS_SHOWN);
    latRest.shown.forEach(latRow);
    var rest = MK.others(placed, showAllThreads, THREADS_SHOWN);
    rest.shown.forEach(markRow);
    rows.forEach(function (r) { box.appendChild(r[0]); });
    var hidden = Math.max(0, threads.length - THREADS_SHOWN) + rest.more + latRest.more;
    if (hidden) {
      var more = document.createElement("button");
      more.className = "more";
      more.id = "more-threads";
      more.textContent = showAllThreads ? "Show the " + THREADS_SHOWN + " busiest threads only" : "Show " + hidden + " more threads";
      more.addEventListener("click", function () { showAllThreads = !showAllThreads; buildTimeline(); });
      box.appendChild(more);
    }
    var legend = document.createElement("div");
    legend.className = "legend";
    var seen = {};
    cpuTracks.forEach(function (t) { for (var i = 0; i < t.bin.length; i++) if (t.comm[i] >= 0) seen[t.comm[i]] = (seen[t.comm[i]] || 0) + t.busy[i]; });
    legend.innerHTML = Object.keys(seen).sort(function (a, b) { return seen[b] - seen[a]; }).slice(0, 12).map(function (c) {
      return "<span><i style=\"background:" + commColour(+c) + "\"></i>" + esc(comm(+c)) + "</span>";
    }).join("");
    if (BLOCKED.length) {
      legend.innerHTML += "<span><i class=\"blocked-s\"></i>blocked, sleeping (S)</span><span><i class=\"blocked-d\"></i>blocked, uninterruptible (D)</span>";
    }
    var kinds = {};
    T.markers.forEach(function (m) { kinds[m[1]] = m[1] === "lost" ? "samples lost" : m[2]; });
    Object.keys(kinds).forEach(function (k) { legend.innerHTML += "<span><i class=\"mk " + k + "\"></i>" + esc(kinds[k]) + "</span>"; });
    legend.innerHTML += MK.legend() + LT.legend();
    box.appendChild(legend);
    // The plot column's geometry, from the first canvas's place in the layout.
    var lbl = axis.querySelector(".lbl");
    tl.plotLeft = lbl.offsetWidth;
    tl.plotWidth = Math.max(100, box.clientWidth - tl.plotLeft);
    rows.forEach(function (r) { r[1](prepCanvas(r[0].querySelector("canvas"), r[2])); });
    var layer = document.createElement("div");
    layer.id = "tl-layer";
    layer.style.left = tl.plotLeft + "px";
    layer.style.width = tl.plotWidth + "px";
    layer.style.height = (legend.offsetTop - 2) + "px";
    box.appendChild(layer);
    // One line per kind and pixel column: a burst of lost-sample records is one mark.
    var drawn = {};
    T.markers.forEach(function (m) {
      var x = Math.round(Math.min(tl.plotWidth - 1, m[0] / (NB * W) * tl.plotWidth));
      if (drawn[m[1] + x]) { drawn[m[1] + x].title += "\n" + m[2] + " at " + secs(m[0]) + " s"; return; }
      var d = document.createElement("div");
      drawn[m[1] + x] = d;
      d.className = "marker " + m[1];
      d.style.left = x + "px";
      d.title = m[2] + " at " + secs(m[0]) + " s";
      layer.appendChild(d);
    });
    var sel = document.createElement("div");
    sel.id = "tl-sel";
    layer.appendChild(sel);
    var tip = document.createElement("div");
    tip.id = "tl-tip";
    tip.hidden = true;
    box.appendChild(tip);
    var markRows = rows.map(function (r) { return r[0]; }).filter(function (r) { return r.tipAt; });
    layer.addEventListener("mousemove", function (ev) { if (!tl.drag) markTip(ev, layer, markRows, tip); });
    layer.addEventListener("mouseleave", function () { tip.hidden = true; });
    layer.addEventListener("mousedown", function (ev) {
      ev.preventDefault();
      tl.drag = { x0: ev.clientX - layer.getBoundingClientRect().left };
      tip.hidden = true;
      tl.drag.x1 = tl.drag.x0;
      showSelection();
    });
    drawSelection();
    performance.mark("kprof-timeline-drawn");
  }
  // The one of `rows` at height y of the timeline layer.
  function rowAt(rows, y) {
    return rows.filter(function (r) { return y >= r.offsetTop && y < r.offsetTop + r.offsetHeight; })[0];
  }
  // What the pointer is over, in a tip beside it, when it is over a mark or latency row.
  function markTip(ev, layer, markRows, tip) {
    var box = layer.getBoundingClientRect(), x = ev.clientX - box.left, y = ev.clientY - box.top;
    var row = rowAt(markRows, y);
    var lines = row ? row.tipAt(x, y - row.offsetTop) : [];
    tip.hidden = !lines.length;
    if (!lines.length) return;
    tip.textContent = lines.join("\n");
    tip.style.top = (y + 16) + "px";
    tip.style.left = Math.max(0, Math.min(tl.plotLeft + x + 12, tl.plotLeft + tl.plotWidth - tip.offsetWidth)) + "px";
  }
  function xToBin(x) { return Math.max(0, Math.min(NB, x / tl.plotWidth * NB)); }
  function showSelection() {
    var d = tl.drag, a = Math.min(d.x0, d.x1), b = Math.max(d.x0, d.x1);
    var b0 = Math.floor(xToBin(a)), b1 = Math.max(b0 + 1, Math.ceil(xToBin(b)));
    paintSel(b0, Math.min(NB, b1));
    $("window").textContent = "selecting " + secs(b0 * W) + " s .. " + secs(Math.min(NB, b1) * W) + " s";
  }
  function paintSel(b0, b1) {
    var sel = $("tl-sel");
    if (!sel) return;
    sel.hidden = b0 <= 0 && b1 >= NB;
    sel.style.left = binX(b0) + "px";
    sel.style.width = Math.max(1, binX(b1) - binX(b0)) + "px";
  }
  function drawSelection() {
    paintSel(state.b0, state.b1);
    $("window").textContent = whole() ? "Whole capture: " + secs(0) + " s .. " + secs(NB * W) + " s" :
      "Window " + secs(state.b0 * W) + " s .. " + secs(state.b1 * W) + " s (" + secs((state.b1 - state.b0) * W) + " s)";
    $("window").setAttribute("data-start-ns", state.b0 * W);
    $("window").setAttribute("data-end-ns", state.b1 * W);
    $("clear-window").hidden = whole();
    // A redraw without new counts (a resize) keeps the window's sample count.
    if (totals) windowCount();
  }
  function windowCount() {
    if (NB && SAMPLED) $("window").textContent = $("window").textContent.replace(/ — .*$/, "") + " — " + totals[0] + " " + D.events[0].name + " " + UNIT;
  }
  document.addEventListener("mousemove", function (ev) {
    if (!tl.drag) return;
    tl.drag.x1 = ev.clientX - $("tl-layer").getBoundingClientRect().left;
    showSelection();
  });
  document.addEventListener("mouseup", function (ev) {
    if (!tl.drag) return;
    var d = tl.drag;
    tl.drag = null;
    d.x1 = ev.clientX - $("tl-layer").getBoundingClientRect().left;
    var a = Math.min(d.x0, d.x1), b = Math.max(d.x0, d.x1);
    if (b - a < 3) { clickAt(ev, d.x1) || drawSelection(); return; } // a click, not a drag
    setWindow(Math.floor(xToBin(a)), Math.ceil(xToBin(b)));
  });
  // A click on a call or wait selects its time (the bins it spans); whether there was one.
  function clickAt(ev, x) {
    var y = ev.clientY - $("tl-layer").getBoundingClientRect().top;
    var row = rowAt(Array.prototype.slice.call($("tl").querySelectorAll(".track.latency")), y);
    var span = row && row.clickAt(x, y - row.offsetTop);
    if (!span) return false;
    var b0 = Math.floor(span[0] / W);
    setWindow(b0, Math.max(b0 + 1, Math.ceil(span[1] / W)));
    return true;
  }
  function setWindow(b0, b1) {
    state.b0 = Math.max(0, Math.min(NB - 1, b0));
    state.b1 = Math.max(state.b0 + 1, Math.min(NB, b1));
    writeHash();
    drawSelection();
    refresh();
  }
  $("clear-window").addEventListener("click", function () { setWindow(0, NB); });
  function drawAxis(g, h) {
    var span = NB * W, step = 1;
    var target = span / Math.max(2, tl.plotWidth / 110);
    while (step * 10 <= target) step *= 10;
    if (step * 5 <= target) step *= 5; else if (step * 2 <= target) step *= 2;
    g.fillStyle = "#5f6b76"; g.strokeStyle = "#aab4be";
    g.font = "11px system-ui, sans-serif"; g.textBaseline = "top";
    for (var t = 0; t <= span; t += step) {
      var x = t / span * tl.plotWidth;
      g.beginPath(); g.moveTo(x + 0.5, h - 5); g.lineTo(x + 0.5, h); g.stroke();
      var label = (t / 1e9).toFixed(Math.max(0, Math.min(9, Math.ceil(-Math.log10(step / 1e9)))));
      if (x + 4 + g.measureText(label).width < tl.plotWidth) g.fillText(label, x + 3, 2);
    }
  }
  // Per bin: the event's count (summed periods) where periods are known, else samples.
  var perBin = T.periods ? T.periods.map(function (p, e) {
    var v = unpack(p, NB);
    if (!D.events[e].period_known) { v = new Float64Array(NB); var r = binRuns[e]; for (var i = 0; i < r.n; i++) v[r.bin[i]] += r.count[i]; }
    return v;
  }) : [];
  function drawBars(g, values, h, colour, unit) {
    var max = 0, i;
    for (i = 0; i < NB; i++) if (values[i] > max) max = values[i];
    g.fillStyle = colour;
    for (i = 0; i < NB; i++) if (values[i] > 0) {
      var y = Math.max(1, values[i] / max * (h - 4));
      g.fillRect(binX(i), h - y, Math.max(1, binX(i + 1) - binX(i) - (NB < 300 ? 0.5 : 0)), y);
    }
    var label = "max " + (max < 100 ? +max.toPrecision(3) : Math.round(max)) + " " + unit;
    g.font = "10px system-ui, sans-serif"; g.textBaseline = "top";
    g.fillStyle = "rgba(255,255,255,0.85)";
    g.fillRect(0, 0, g.measureText(label).width + 6, 13);
    g.fillStyle = "#5f6b76";
    g.fillText(label, 3, 1);
  }
  function drawRate(g, e, h) {
    drawBars(g, perBin[e], h, "#6f9fd8", (D.events[e].period_known ? "events" : "samples") + " / bin");
  }
  function drawRatio(g, h) {
    var a = perBin[state.ratio[0]], b = perBin[state.ratio[1]], v = new Float64Array(NB);
    for (var i = 0; i < NB; i++) v[i] = b[i] > 0 ? a[i] / b[i] : 0;
    drawBars(g, v, h, "#9a6700", "");
  }
  function drawCpu(g, t, h) {
    for (var i = 0; i < t.bin.length; i++) {
      var b = t.bin[i], busy = state.idle ? t.all[i] : t.busy[i];
      if (!busy) continue;
      g.globalAlpha = 0.3 + 0.7 * t.busy[i] / t.all[i];
      g.fillStyle = t.comm[i] >= 0 ? commColour(t.comm[i]) : "#c0c6cc";
      g.fillRect(binX(b), 1, Math.max(1, binX(b + 1) - binX(b)), h - 2);
    }
    g.globalAlpha = 1;
  }
  function drawThread(g, t, max, c, h) {
    // With blocked time, on-CPU samples above and blocked time in a strip below.
    var top = BLOCKED.length ? h - BLOCKED_H - 1 : h;
    g.fillStyle = commColour(c);
    for (var i = 0; i < t.bin.length; i++) {
      var y = Math.max(2, t.count[i] / max * (top - 2));
      g.fillRect(binX(t.bin[i]), top - y, Math.max(1, binX(t.bin[i] + 1) - binX(t.bin[i])), y);
    }
    var b = t.blocked;
    if (!b) return;
    // Grey and black: no command's colour (hues at 52 % lightness) is either.
    // Each bin's blocked ns as a share of its width, S then D: a thread blocked all the
    // bin long fills it.
    for (i = 0; i < b.bin.length; i++) {
      var x = binX(b.bin[i]), w = binX(b.bin[i] + 1) - x;
      var ws = Math.min(1, b.s[i] / W) * w, wd = Math.min(1 - ws / w, b.d[i] / W) * w;
      g.fillStyle = BLOCKED_S;
      if (b.s[i] > 0) g.fillRect(x, h - BLOCKED_H, Math.max(1, ws), BLOCKED_H);
      g.fillStyle = BLOCKED_D;
      if (b.d[i] > 0) g.fillRect(x + ws, h - BLOCKED_H, Math.max(1, wd), BLOCKED_H);
    }
  }

  // ---- the images table (written by kprofctl): sort by a header, numbers by data-v ----
  (function () {
    var table = $("images-table");
    if (!table) return;
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener("click", function () {
        var desc = !th.classList.contains("desc");
        Array.prototype.forEach.call(heads, function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(desc ? "desc" : "asc");
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        var key = function (row) {
          var v = row.cells[col].getAttribute("data-v");
          return v === null ? row.cells[col].textContent.toLowerCase() : parseFloat(v);
        };
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          var c = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
          return desc ? -c : c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  })();

  // ---- tabs, idle toggle, refresh ----
  function showTab(name) {
    state.tab = name;
    document.querySelectorAll("main > .pane").forEach(function (p) { p.hidden = p.id !== name; });
    document.querySelectorAll("#tabs button").forEach(function (b) { b.classList.toggle("on", b.getAttribute("data-pane") === name); });
    if (name === "flamegraph" && SAMPLED) drawFlame();
  }
  document.querySelectorAll("#tabs button").forEach(function (b) {
    b.addEventListener("click", function () { showTab(b.getAttribute("data-pane")); writeHash(); });
  });
  (function () {
    if (NEV < 2 || !NB) return;
    $("ratio-ctl").hidden = false;
    ["ratio-a", "ratio-b"].forEach(function (id, k) {
      var sel = $(id);
      sel.innerHTML = "<option value=\"\">-</option>" + D.events.map(function (ev, e) { return "<option value=\"" + e + "\">" + esc(ev.name) + "</option>"; }).join("");
      sel.addEventListener("change", function () {
        var a = $("ratio-a").value, b = $("ratio-b").value;
        state.ratio = a !== "" && b !== "" && a !== b ? [parseInt(a, 10), parseInt(b, 10)] : null;
        writeHash(); buildTimeline();
      });
    });
  })();
  $("show-idle").addEventListener("change", function () {
    state.idle = $("show-idle").checked;
    writeHash(); buildTimeline(); refresh();
  });
  function refresh() {
    if (SAMPLED) {
      computeCounts();
      computeFunctions();
      computeNodes();
      renderFunctions();
      renderTree(false);
      renderSource();
      if (state.tab === "flamegraph") drawFlame();
      windowCount();
    }
    MK.renderLog();
    LT.render();
    $("idle-note").textContent = !SAMPLED ? "No samples: this capture recorded timed calls and lock waits only." : idleSamples > 0 && !state.idle ? "(" + idleSamples + " idle sample" + (idleSamples === 1 ? "" : "s") + " left out, as in the text summary)" : "";
    if (!document.body.hasAttribute("data-ready")) performance.mark("kprof-views-ready");
    document.body.setAttribute("data-ready", "1");
  }
  window.addEventListener("hashchange", function () {
    var before = [state.b0, state.b1, state.idle].join();
    readHash();
    $("show-idle").checked = state.idle;
    showTab(state.tab);
    if ([state.b0, state.b1, state.idle].join() !== before) { buildTimeline(); refresh(); }
  });
  var resizeTimer = 0;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { sizeColumns(); buildTimeline(); if (state.tab === "flamegraph" && SAMPLED) drawFlame(); }, 150);
  });
  // The CLI's view for tests and scripts: the window's per-function self samples.
  window.kprofView = {
    window: function () { return { start: state.b0 * W, end: state.b1 * W, bins: NB, width: W }; },
    setWindowNs: function (a, b) { setWindow(Math.floor(a / W), Math.ceil(b / W)); },
    selfCounts: function (e) {
      var out = {};
      fnRows.forEach(function (f) { var k = fnImg(f) + ":" + fnName(f); if (fnSelf[e || 0][f] > 0) out[k] = (out[k] || 0) + fnSelf[e || 0][f]; });
      return out;
    },
    totals: function () { return totals.slice(); },
    marks: function () { return MK.view(); },
    latency: function () { return LT.view(); }
  };

  if (D.ratio && NB) state.ratio = D.ratio;
  readHash();
  if (!SAMPLED) {
    // Only the tabs that have something to show; the latency tab first.
    ["functions", "calltree", "flamegraph", "source"].forEach(function (pane) {
      document.querySelector("#tabs button[data-pane=" + pane + "]").hidden = true;
      if (state.tab === pane) state.tab = D.latency ? "latency" : "log";
    });
    $("show-idle").parentNode.hidden = true;
  }
  $("show-idle").checked = state.idle;
  if (state.ratio) { $("ratio-a").value = state.ratio[0]; $("ratio-b").value = state.ratio[1]; }
  buildTimeline();
  showTab(state.tab);
  refresh();
})();
