"use strict";
// Function latency and lock waits (html/latency.rs): a row of spans per thread on the
// timeline (every drawn call of a timed function, every drawn lock wait) and the Latency tab,
// both for the selected window. page.js calls kprofLatency with what it shares: unpack, esc,
// secs, $, the bins, the window state and whole().
function kprofLatency(D, k) {
  var L = D.latency, $ = k.$;
  var LANE_H = 13, MAX_LANES = 4, SHOWN_IN_TIP = 8, PCTS = [50, 90, 99];
  var fns = [], waits = null, rows = {}, rowList = [];

  // ns as the text report writes them: three significant digits.
  function human(ns) {
    if (ns < 1000) return Math.round(ns) + " ns";
    var units = [[1e3, "\u00b5s"], [1e6, "ms"], [1e9, "s"]], i = 0;
    while (i + 1 < units.length && ns >= units[i + 1][0] * 0.9995) i++;
    var v = ns / units[i][0];
    return (v >= 99.95 ? v.toFixed(0) : v >= 9.995 ? v.toFixed(1) : v.toFixed(2)) + " " + units[i][1];
  }
  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }
  function decodeSpans(S, extra) {
    var n = S.n, start = k.unpack(S.start, n);
    for (var i = 1; i < n; i++) start[i] += start[i - 1];
    return { n: n, thread: k.unpack(S.thread, n, true), start: start, dur: k.unpack(S.dur, n),
      lane: k.unpack(S.lane, n), extra: k.unpack(S[extra], n) };
  }
  // Per-bin columns with bins as deltas, the bins made absolute.
  function decodeBins(B, fields) {
    var out = { bin: k.unpack(B.bin, B.n) };
    for (var i = 1; i < B.n; i++) out.bin[i] += out.bin[i - 1];
    fields.forEach(function (f) { out[f] = k.unpack(B[f], B.n); });
    return out;
  }
  function rowOf(thread) {
    if (!rows[thread]) { rows[thread] = { thread: thread, items: [], lanes: 1, calls: 0, waits: 0 }; rowList.push(rows[thread]); }
    return rows[thread];
  }
  function addSpans(S, g) {
    for (var i = 0; i < S.n; i++) {
      if (S.thread[i] < 0) continue;
      var r = rowOf(S.thread[i]);
      r.items.push({ g: g, i: i });
      r.lanes = Math.max(r.lanes, Math.min(MAX_LANES, S.lane[i] + 1));
      if (g < 0) r.waits++; else r.calls++;
    }
  }
  if (L) {
    fns = L.functions.map(function (f, g) {
      var s = decodeSpans(f.spans, "depth"), b = decodeBins(f.bins, ["total", "max", "nk"]);
      var nk = sum(b.nk), ks = k.unpack(f.bins.k, nk), cs = k.unpack(f.bins.c, nk);
      addSpans(s, g);
      return { f: f, s: s, b: b, ks: ks, cs: cs };
    });
    if (L.waits) {
      waits = { w: L.waits, s: decodeSpans(L.waits.spans, "label") };
      addSpans(waits.s, -1);
      ["locks", "callers"].forEach(function (key) {
        waits[key] = L.waits[key].map(function (grp) { return { g: grp, b: decodeBins(grp.bins, ["count", "total", "max"]) }; });
      });
    }
    rowList.forEach(function (r) { r.items.sort(function (a, b) { return spansOf(a.g).start[a.i] - spansOf(b.g).start[b.i]; }); });
    var tab = $("latency-tab");
    if (tab) tab.hidden = false;
  }
  function sum(a) { var t = 0; for (var i = 0; i < a.length; i++) t += a[i]; return t; }
  function spansOf(g) { return g < 0 ? waits.s : fns[g].s; }
  function colour(g) { return g < 0 ? "#f4b6b0" : "hsl(" + ((g * 137.508 + 95) % 360).toFixed(0) + ",50%,72%)"; }
  function label(g, i) { return g < 0 ? L.waits.labels[waits.s.extra[i]] : fns[g].f.name; }
  function describe(g, i) {
    var S = spansOf(g), text = (g < 0 ? "lock wait " : "call of ") + label(g, i) + " " + human(S.dur[i]) +
      " from " + k.secs(S.start[i]) + " s";
    if (g >= 0 && S.extra[i] > 0) text += " (depth " + S.extra[i] + ")";
    return text;
  }

  // ---- timeline rows ----
  function total() { return k.NB * k.W; }
  function height(r) { return r.lanes * LANE_H + 2; }
  // Calls and waits as bars in their lane, named where the name fits. Within one pixel
  // column only the first span of a lane is drawn: 10,000 spans cost no more than the row's
  // width. The number drawn, for tests.
  function draw(g, r, width) {
    var span = total(), drawn = 0, last = [];
    var x = function (ns) { return Math.min(width, ns / span * width); };
    g.font = "10px system-ui, sans-serif";
    g.textBaseline = "middle";
    r.items.forEach(function (it) {
      var S = spansOf(it.g), lane = Math.min(MAX_LANES - 1, S.lane[it.i]), y = 1 + lane * LANE_H;
      var x0 = x(S.start[it.i]), x1 = Math.max(x0 + 1, x(S.start[it.i] + S.dur[it.i]));
      if (Math.floor(x1) <= last[lane]) return;
      last[lane] = Math.floor(x1);
      drawn++;
      g.fillStyle = colour(it.g);
      g.fillRect(x0, y, x1 - x0, LANE_H - 2);
      if (x1 - x0 >= 4) {
        g.fillStyle = it.g < 0 ? "#b42318" : "#5f6b76";
        g.fillRect(x0, y, 1, LANE_H - 2);
        g.fillRect(x1 - 1, y, 1, LANE_H - 2);
      }
      var name = label(it.g, it.i);
      if (x1 - x0 > g.measureText(name).width + 6) {
        g.fillStyle = "#1d2125";
        g.fillText(name, x0 + 3, y + LANE_H / 2 - 1);
      }
    });
    return drawn;
  }
  // The spans under the pointer at (px, py) of row r: those of its lane within 3 px.
  function under(r, px, py, width) {
    var span = total(), ns = px / width * span, slack = 3 / width * span;
    var lane = Math.max(0, Math.min(r.lanes - 1, Math.floor((py - 1) / LANE_H)));
    return r.items.filter(function (it) {
      var S = spansOf(it.g);
      return Math.min(MAX_LANES - 1, S.lane[it.i]) === lane &&
        S.start[it.i] - slack <= ns && ns <= S.start[it.i] + S.dur[it.i] + slack;
    });
  }
  function at(r, px, py, width) {
    var found = under(r, px, py, width);
    // The slowest first: that is what the pointer is most likely after.
    found.sort(function (a, b) { return spansOf(b.g).dur[b.i] - spansOf(a.g).dur[a.i]; });
    var out = found.slice(0, SHOWN_IN_TIP).map(function (it) { return describe(it.g, it.i); });
    if (found.length > SHOWN_IN_TIP) out.push("and " + (found.length - SHOWN_IN_TIP) + " more");
    if (out.length) out.push("click: select its time on the timeline");
    return out;
  }
  // [start, end] ns of the slowest span under the pointer, for a click to select.
  function extent(r, px, py, width) {
    var found = under(r, px, py, width), best = null;
    found.forEach(function (it) { var S = spansOf(it.g); if (!best || S.dur[it.i] > best[1] - best[0]) best = [S.start[it.i], S.start[it.i] + S.dur[it.i]]; });
    return best;
  }
  function others(placed, all, limit) {
    var rest = rowList.filter(function (r) { return !placed[r.thread]; });
    rest.sort(function (a, b) { return b.items.length - a.items.length || a.thread - b.thread; });
    return { shown: all ? rest : rest.slice(0, limit), more: Math.max(0, rest.length - limit) };
  }
  function threadName(r) {
    var t = D.threads[r.thread];
    return t ? k.comm(t[2]) + " " + t[1] : "?";
  }
  function legend() {
    if (!rowList.length) return "";
    var out = "";
    fns.forEach(function (F, g) { out += "<span><i class=\"lat\" style=\"background:" + colour(g) + "\"></i>" + k.esc(F.f.name) + " call</span>"; });
    if (waits) out += "<span><i class=\"lat wait\"></i>lock wait</span>";
    return out;
  }

  // ---- the Latency tab, for the window ----
  function inWindow(b) { return b >= k.state.b0 && b < k.state.b1; }
  function binOf(t) { return Math.min(k.NB - 1, Math.floor(t / k.W)); }
  // Nearest rank, as the report computes them.
  function ranks(d) {
    d.sort(function (a, b) { return a - b; });
    return PCTS.map(function (p) { return d.length ? d[Math.min(d.length, Math.max(1, Math.ceil(p * d.length / 100))) - 1] : 0; });
  }
  // A function's statistics and histogram (over its whole-capture buckets) in the window;
  // percentiles null when the page lacks some of the window's calls.
  function windowed(F) {
    var f = F.f;
    if (k.whole()) return { s: f.stats, p: [f.stats.p50, f.stats.p90, f.stats.p99], hist: f.hist };
    var s = { count: 0, total: 0, max: 0 }, byK = {}, at = 0;
    for (var j = 0; j < F.b.bin.length; j++) {
      var n = F.b.nk[j], take = inWindow(F.b.bin[j]);
      for (var q = at; q < at + n; q++) if (take) { byK[F.ks[q]] = (byK[F.ks[q]] || 0) + F.cs[q]; s.count += F.cs[q]; }
      at += n;
      if (take) { s.total += F.b.total[j]; s.max = Math.max(s.max, F.b.max[j]); }
    }
    var p = null;
    if (!f.dropped) {
      var d = [];
      for (var i = 0; i < F.s.n; i++) if (inWindow(binOf(F.s.start[i]))) d.push(F.s.dur[i]);
      p = ranks(d);
    }
    var hist = f.hist.map(function (h) { return [h[0], h[1], byK[h[0] < 2 ? 0 : Math.round(Math.log2(h[0]))] || 0]; });
    return { s: s, p: p, hist: hist };
  }
  function statsLine(w) {
    var s = w.s;
    if (!s.count) return "no calls" + (k.whole() ? "" : " began in the window");
    var pc = function (i) { return w.p ? human(w.p[i]) : "\u2013"; };
    return plural(s.count, "call", "calls") + ", total " + human(s.total) + ", mean " + human(Math.floor(s.total / s.count)) +
      ", p50 " + pc(0) + ", p90 " + pc(1) + ", p99 " + pc(2) + ", max " + human(s.max);
  }
  function notes(F, w) {
    var f = F.f, out = [], whole = k.whole() ? "" : " (a count of the whole capture)";
    if (f.unmatched_returns) out.push(plural(f.unmatched_returns, "call", "calls") + " began before the capture (a return without its entry): not in the statistics" + whole);
    if (f.unfinished) out.push(plural(f.unfinished, "call was", "calls were") + " still running at the end of the capture (an entry without its return): not in the statistics" + whole);
    // Only a whole capture's entries compare with the kernel's count of them.
    if (k.whole() && f.hits != null && f.hits !== f.stats.count + f.unfinished) out.push("the kernel counted " + plural(f.hits, "hit", "hits") + " of the entry probe; the capture has " + (f.stats.count + f.unfinished));
    if (f.lost) out.push("the kernel lost " + f.lost + " of its entry and return records: some calls are missing, and calls around them may be paired wrongly");
    if (f.dropped) out.push("the timeline draws the " + F.s.n + " slowest calls; " + f.dropped + " faster ones are left out" +
      (w.p ? "" : ", so a window's percentiles are not on this page"));
    return out;
  }
  function histSvg(hist, unit) {
    var n = hist.length, max = 0;
    hist.forEach(function (h) { max = Math.max(max, h[2]); });
    var bw = Math.max(18, Math.min(46, Math.floor(640 / Math.max(1, n)))), H = 96, top = 16, left = 40, bottom = 18;
    var width = left + n * bw + 44, height = top + H + bottom, out = [];
    out.push("<svg class=\"lat-hist\" width=\"" + width + "\" height=\"" + height +
      "\" viewBox=\"0 0 " + width + " " + height + "\" role=\"img\" aria-label=\"call durations, log2 buckets of " + k.esc(unit) + "\">");
    out.push("<line class=\"axis\" x1=\"" + (left - 4) + "\" y1=\"" + (top + H) + "\" x2=\"" + (left + n * bw) + "\" y2=\"" + (top + H) + "\"/>");
    out.push("<text class=\"ylab\" x=\"" + (left - 8) + "\" y=\"" + (top + 4) + "\">" + max + "</text><text class=\"ylab\" x=\"" + (left - 8) + "\" y=\"" + (top + H) + "\">0</text>");
    // Every label where it fits beside the last one drawn.
    var step = Math.max(1, Math.ceil(String(hist.length ? hist[n - 1][0] : 0).length * 6.5 / bw));
    hist.forEach(function (h, i) {
      var x = left + i * bw, bh = max ? Math.round(h[2] / max * H) : 0;
      if (h[2] && bh < 1) bh = 1;
      out.push("<g class=\"bar\"><title>" + h[0] + " \u2013 " + h[1] + " " + k.esc(unit) + ": " + plural(h[2], "call", "calls") + "</title>" +
        "<rect class=\"hit\" x=\"" + x + "\" y=\"" + top + "\" width=\"" + bw + "\" height=\"" + H + "\"/>" +
        "<rect x=\"" + (x + 2) + "\" y=\"" + (top + H - bh) + "\" width=\"" + (bw - 4) + "\" height=\"" + bh + "\"/>" +
        (h[2] ? "<text class=\"cnt\" x=\"" + (x + bw / 2) + "\" y=\"" + (top + H - bh - 3) + "\">" + h[2] + "</text>" : "") + "</g>");
      if (i % step === 0) out.push("<text class=\"xlab\" x=\"" + (x + bw / 2) + "\" y=\"" + (top + H + 13) + "\">" + h[0] + "</text>");
    });
    out.push("<text class=\"unit\" x=\"" + (left + n * bw + 6) + "\" y=\"" + (top + H + 13) + "\">" + k.esc(unit) + "</text></svg>");
    return out.join("");
  }
  function fnPanel(F, g) {
    var f = F.f, w = windowed(F);
    var html = ["<div class=\"lat-fn\" data-function=\"" + k.esc(f.name) + "\" data-count=\"" + w.s.count + "\">",
      "<h3><i class=\"lat\" style=\"background:" + colour(g) + "\"></i><code>" + k.esc(f.name) + "</code> <span class=\"" + (f.kind === "kernel" ? "kernel" : "user") + "\">" + k.esc(f.kind) + "</span></h3>",
      "<p class=\"lat-stats\">" + statsLine(w) + "</p>"];
    notes(F, w).forEach(function (n) { html.push("<p class=\"note\">" + k.esc(n) + "</p>"); });
    if (w.s.count) html.push(histSvg(w.hist, f.unit));
    html.push("</div>");
    return html.join("");
  }
  // A lock group's count, total and max in the window.
  function groupStats(G) {
    if (k.whole()) return { count: G.g.stats.count, total: G.g.stats.total, max: G.g.stats.max };
    var s = { count: 0, total: 0, max: 0 };
    for (var j = 0; j < G.b.bin.length; j++) if (inWindow(G.b.bin[j])) { s.count += G.b.count[j]; s.total += G.b.total[j]; s.max = Math.max(s.max, G.b.max[j]); }
    return s;
  }
  function groupTable(list, what, paths) {
    var shown = list.map(function (G) { return { G: G, s: groupStats(G) }; }).filter(function (x) { return x.s.count > 0; });
    shown.sort(function (a, b) { return b.s.total - a.s.total || (a.G.g.name < b.G.g.name ? -1 : 1); });
    var html = ["<table class=\"lat-locks\" data-what=\"" + what + "\"><thead><tr><th class=\"n\">Contended</th><th class=\"n\">Total wait</th><th class=\"n\">Max wait</th><th class=\"n\">Avg wait</th><th>Type</th><th>" + what + "</th></tr></thead><tbody>"];
    shown.forEach(function (x) {
      var g = x.G.g, name = "<code>" + k.esc(g.name) + "</code>";
      if (paths) name = "<details><summary>" + name + "</summary><div class=\"path\">" + g.path.map(k.esc).join("<br>") + "</div></details>";
      html.push("<tr><td class=\"n\">" + x.s.count + "</td><td class=\"n\">" + human(x.s.total) + "</td><td class=\"n\">" + human(x.s.max) +
        "</td><td class=\"n\">" + human(Math.floor(x.s.total / x.s.count)) + "</td><td>" + k.esc(g.type) + "</td><td class=\"fn\">" + name + "</td></tr>");
    });
    if (!shown.length) html.push("<tr><td colspan=\"6\" class=\"note\">No lock wait began in the window.</td></tr>");
    html.push("</tbody></table>");
    return html.join("");
  }
  function lockPanel() {
    var w = waits.w, whole = k.whole() ? "" : " (a count of the whole capture)", what = [], html = ["<div class=\"lat-waits\"><h3>Lock waits</h3>"];
    if (w.kernel_locks) what.push("kernel locks");
    if (w.futex) what.push("futex waits");
    var s = { count: 0, total: 0 };
    waits.locks.forEach(function (G) { var x = groupStats(G); s.count += x.count; s.total += x.total; });
    html.push("<p class=\"lat-stats\">" + (s.count ? plural(s.count, "wait", "waits") + ", " + human(s.total) + " waited" : "no lock waits") +
      " (" + what.join(", ") + ")</p>");
    if (w.unmatched_ends) html.push("<p class=\"note\">" + plural(w.unmatched_ends, "wait", "waits") + " began before the capture (an end without its start): not counted" + whole + "</p>");
    if (w.unfinished) html.push("<p class=\"note\">" + plural(w.unfinished, "thread was", "threads were") + " still waiting at the end of the capture (a start without its end): not counted" + whole + "</p>");
    if (w.count) {
      html.push("<h4>By lock</h4>" + groupTable(waits.locks, "Lock", false));
      html.push("<h4>By waiting function</h4><p class=\"note\">The first function of each wait's call path outside the locking code; click it for the call path of its longest wait (of the whole capture).</p>" + groupTable(waits.callers, "Caller", true));
    }
    html.push("</div>");
    return html.join("");
  }
  function render() {
    var box = $("latency-panel");
    if (!box) return;
    if (!L) {
      box.innerHTML = "<p class=\"note\">No function was timed and no lock wait recorded in this capture: record with --latency FUNC " +
        "(the time from entry to return of every call) or --contention (kernel lock and futex waits).</p>";
      return;
    }
    var html = ["<p class=\"note\">" + (k.whole() ? "The whole capture." : "Calls and waits that began in the selected window.") +
      " A call's duration is from its entry to its return; its span on the timeline sits on its thread's row, under the thread's samples." +
      " Histograms: log2 buckets, as bcc's funclatency prints them; a bar counts the calls from its label up to the next label.</p>"];
    fns.forEach(function (F, g) { html.push(fnPanel(F, g)); });
    if (waits) html.push(lockPanel());
    box.innerHTML = html.join("");
  }

  return {
    n: rowList.length,
    ofThread: function (thread) { return rows[thread]; },
    others: others,
    height: height,
    label: function (r) { return threadName(r) + (r.calls && r.waits ? " calls, waits" : r.calls ? " calls" : " waits"); },
    title: function (r) {
      return "timed calls and lock waits of " + threadName(r) + ": " + plural(r.calls, "call", "calls") + ", " +
        plural(r.waits, "wait", "waits") + " drawn; hover one to read it, click it to select its time";
    },
    draw: draw,
    at: at,
    extent: extent,
    legend: legend,
    render: render,
    // For tests and scripts: the spans per row and each function's count in the window.
    view: function () {
      return {
        rows: rowList.map(function (r) { return { thread: r.thread, calls: r.calls, waits: r.waits, lanes: r.lanes }; }),
        functions: fns.map(function (F) { var w = windowed(F); return { name: F.f.name, count: w.s.count, total: w.s.total, max: w.s.max, p: w.p }; })
      };
    }
  };
}
