"use strict";
// Marks of the profiled system (html/marks.rs): a mark row per thread on the timeline (ticks
// for marks, labelled bars for begin/end spans) and the Log tab. page.js calls kprofMarks with
// what it shares: unpack, esc, secs, comm, setWindow, the bins and the window state.
function kprofMarks(D, k) {
  var M = D.marks, N = M.n, SP = M.spans, SN = SP.n;
  var LANE_H = 14, TICK_H = 6, MAX_LANES = 4, PAGE = 100, AROUND = 5, SHOWN_IN_TIP = 8;
  var time = k.unpack(M.time, N);
  for (var i = 1; i < N; i++) time[i] += time[i - 1];
  var thread = k.unpack(M.thread, N), cpu = k.unpack(M.cpu, N, true);
  var event = k.unpack(M.event, N), text = k.unpack(M.text, N);
  var spBegin = k.unpack(SP.begin, SN), spEnd = k.unpack(SP.end, SN, true);
  var spName = k.unpack(SP.name, SN), spLane = k.unpack(SP.lane, SN);
  var spanOf = new Int32Array(N).fill(-1);
  var threads = M.threads.map(function (t, i) {
    return { index: i, pid: t[0], tid: t[1], prof: t[2], ticks: [], spans: [], lanes: 1 };
  });
  for (var s = 0; s < SN; s++) {
    spanOf[spBegin[s]] = s;
    if (spEnd[s] >= 0) spanOf[spEnd[s]] = s;
    var th = threads[thread[spBegin[s]]];
    th.spans.push(s);
    th.lanes = Math.max(th.lanes, Math.min(MAX_LANES, spLane[s] + 1));
  }
  // Ticks: plain marks, tracepoints and ends that closed no span.
  for (i = 0; i < N; i++) if (spanOf[i] < 0) threads[thread[i]].ticks.push(i);
  var byProf = {};
  threads.forEach(function (t) { if (t.prof >= 0) byProf[t.prof] = t; });
  // Busiest first for the rows of threads without a sample track.
  var byCount = threads.slice().sort(function (a, b) {
    return (b.ticks.length + b.spans.length) - (a.ticks.length + a.spans.length) || a.index - b.index;
  });

  function total() { return k.NB * k.W; }
  function threadLabel(t) {
    var p = D.threads[t.prof];
    return (p ? k.comm(p[2]) : "?") + " " + (t.tid < 0 ? "?" : t.tid);
  }
  function spanEnd(s) { return spEnd[s] >= 0 ? time[spEnd[s]] : Math.max(total(), time[spBegin[s]]); }
  function spanName(s) { return SP.names[spName[s]]; }
  function spanText(s) {
    var ms = ((spanEnd(s) - time[spBegin[s]]) / 1e6).toFixed(3);
    return spanName(s) + (spEnd[s] >= 0 ? " " + ms + " ms" : " open at capture end (" + ms + " ms shown)");
  }
  function describe(i) {
    var t = threads[thread[i]];
    return k.secs(time[i]) + " s  " + threadLabel(t) + (cpu[i] >= 0 ? "  CPU " + cpu[i] : "") +
      "  " + M.events[event[i]] + ": " + M.texts[text[i]];
  }
  function tracepoint(i) { return M.events[event[i]] !== "ftrace:print"; }
  function colour(n) { return "hsl(" + ((n * 137.508 + 200) % 360).toFixed(0) + ",55%,78%)"; }

  // ---- timeline rows ----
  // The mark rows to show after the sample tracks: threads with marks and no shown track,
  // `limit` of them unless `all`; `more` is how many `limit` leaves out.
  function others(placed, all, limit) {
    var rest = byCount.filter(function (t) { return !placed[t.index]; });
    return { shown: all ? rest : rest.slice(0, limit), more: Math.max(0, rest.length - limit) };
  }
  // A row: a strip of ticks on top, then a lane per level of nested spans; a row without
  // spans is all ticks.
  function tickH(t) { return t.spans.length ? TICK_H : LANE_H; }
  function laneTop(t, lane) { return tickH(t) + 1 + lane * LANE_H; }
  function height(t) { return t.spans.length ? laneTop(t, t.lanes) + 1 : LANE_H + 2; }
  // Spans as bars in their lane, named where the name fits; ticks as 1 px lines in the tick
  // strip, darker where a pixel column holds more. Within one pixel column only the first
  // span of a lane is drawn and ticks are counted, not drawn one by one: 10,000 marks cost no
  // more than the row's width, and dense ticks do not hide the spans.
  function draw(g, t, width) {
    var span = total();
    var x = function (ns) { return Math.min(width, ns / span * width); };
    g.font = "10px system-ui, sans-serif";
    g.textBaseline = "middle";
    var last = [];
    t.spans.forEach(function (s) {
      var lane = Math.min(MAX_LANES - 1, spLane[s]), y = laneTop(t, lane);
      var x0 = x(time[spBegin[s]]), x1 = Math.max(x0 + 1, x(spanEnd(s)));
      if (Math.floor(x1) <= last[lane]) return;
      last[lane] = Math.floor(x1);
      g.fillStyle = colour(spName[s]);
      g.fillRect(x0, y, x1 - x0, LANE_H - 2);
      // Edges only where they leave some colour between them (dense frames stay one bar).
      if (x1 - x0 >= 4) {
        g.fillStyle = spEnd[s] >= 0 ? "#5f6b76" : "#b0b8c0";
        g.fillRect(x0, y, 1, LANE_H - 2);
        if (spEnd[s] >= 0) g.fillRect(x1 - 1, y, 1, LANE_H - 2);
      }
      var label = spanName(s) + (spEnd[s] >= 0 ? "" : " \u2026");
      if (x1 - x0 > g.measureText(label).width + 6) {
        g.fillStyle = "#1d2125";
        g.fillText(label, x0 + 3, y + LANE_H / 2 - 1);
      }
    });
    var columns = {};
    t.ticks.forEach(function (i) {
      var c = tracepoint(i) ? "#0a7d7d" : "#1d2125", px = Math.min(width - 1, Math.floor(x(time[i])));
      var col = columns[c] || (columns[c] = {});
      col[px] = (col[px] || 0) + 1;
    });
    Object.keys(columns).forEach(function (c) {
      g.fillStyle = c;
      Object.keys(columns[c]).forEach(function (px) {
        g.globalAlpha = Math.min(1, 0.45 + 0.15 * columns[c][px]);
        g.fillRect(+px, 0, 1, tickH(t) + 1);
      });
    });
    g.globalAlpha = 1;
  }
  // The first index of `list` (mark indices in time order) at or after `ns`.
  function firstAt(list, ns) {
    var lo = 0, hi = list.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (time[list[mid]] < ns) lo = mid + 1; else hi = mid; }
    return lo;
  }
  // What the pointer at (px, py) of the row is over: ticks within 3 px, the span of its lane.
  function at(t, px, py, width) {
    var span = total(), ns = px / width * span, slack = 3 / width * span, out = [], more = 0;
    var lane = py < laneTop(t, 0) ? -1 : Math.min(t.lanes - 1, Math.floor((py - laneTop(t, 0)) / LANE_H));
    t.spans.forEach(function (s) {
      if (Math.min(MAX_LANES - 1, spLane[s]) !== lane) return;
      if (time[spBegin[s]] - slack <= ns && ns <= spanEnd(s) + slack) {
        if (out.length < SHOWN_IN_TIP) out.push("span " + spanText(s) + " from " + describe(spBegin[s])); else more++;
      }
    });
    for (var j = firstAt(t.ticks, ns - slack); j < t.ticks.length && time[t.ticks[j]] <= ns + slack; j++) {
      if (out.length < SHOWN_IN_TIP) out.push(describe(t.ticks[j])); else more++;
    }
    if (more) out.push("and " + more + " more (Log tab)");
    return out;
  }
  function legend() {
    if (!N) return "";
    return "<span><i class=\"mk mark\"></i>mark</span><span><i class=\"mk tracepoint\"></i>tracepoint</span>" +
      "<span><i class=\"span\"></i>span (begin..end)</span>";
  }

  // ---- Log tab ----
  var log = { page: 0, selected: -1 };
  var $ = k.$;
  function rows() {
    var q = $("log-filter").value.toLowerCase(), inWindow = $("log-window").checked;
    var a = k.state.b0 * k.W, b = k.state.b1 * k.W, out = [];
    var texts = M.texts.map(function (x) { return x.toLowerCase(); });
    var events = M.events.map(function (x) { return x.toLowerCase(); });
    var labels = threads.map(function (t) { return threadLabel(t).toLowerCase(); });
    for (var i = 0; i < N; i++) {
      if (inWindow && (time[i] < a || time[i] >= b)) continue;
      if (q && texts[text[i]].indexOf(q) < 0 && events[event[i]].indexOf(q) < 0 && labels[thread[i]].indexOf(q) < 0) continue;
      out.push(i);
    }
    return out;
  }
  function renderLog() {
    var list = rows(), pages = Math.max(1, Math.ceil(list.length / PAGE));
    log.page = Math.min(log.page, pages - 1);
    var html = [];
    list.slice(log.page * PAGE, log.page * PAGE + PAGE).forEach(function (i) {
      var s = spanOf[i], t = threads[thread[i]];
      html.push("<tr data-mark=\"" + i + "\"" + (i === log.selected ? " class=\"on\"" : "") + ">" +
        "<td class=\"n\">" + k.secs(time[i]) + "</td><td class=\"n\">" + (cpu[i] >= 0 ? cpu[i] : "") + "</td>" +
        "<td title=\"pid " + t.pid + " tid " + t.tid + "\">" + k.esc(threadLabel(t)) + "</td>" +
        "<td>" + k.esc(M.events[event[i]]) + "</td>" +
        "<td class=\"fn\" title=\"" + k.esc(M.texts[text[i]]) + "\">" + k.esc(M.texts[text[i]]) + "</td>" +
        "<td title=\"" + (s >= 0 ? k.esc(spanText(s)) : "") + "\">" + (s >= 0 ? k.esc(spanText(s)) : "") + "</td></tr>");
    });
    $("log-table").tBodies[0].innerHTML = html.join("");
    var q = $("log-filter").value || $("log-window").checked;
    $("log-count").textContent = list.length + (q ? " of " + N : "") + " marks";
    $("log-page").textContent = "page " + (log.page + 1) + " of " + pages;
    $("log-prev").disabled = log.page === 0;
    $("log-next").disabled = log.page >= pages - 1;
  }
  // The window of a mark: its span's begin..end, else AROUND bins either side of it.
  function select(i) {
    if (!k.NB) return;
    var s = spanOf[i], b0, b1;
    if (s >= 0) {
      b0 = Math.floor(time[spBegin[s]] / k.W);
      b1 = Math.max(b0 + 1, Math.ceil(spanEnd(s) / k.W));
    } else {
      var b = Math.floor(time[i] / k.W);
      b0 = b - AROUND;
      b1 = b + AROUND + 1;
    }
    log.selected = i;
    k.setWindow(b0, b1);
  }
  (function () {
    if (!N) {
      $("log-note").textContent = "No marks in this capture: record with --markers (lines written to " +
        "tracefs trace_marker, kprof/marker.h) or -e SUBSYS:EVENT (tracepoints).";
    } else if (M.dropped) {
      $("log-note").textContent += " The first " + N + " marks only: " + M.dropped +
        " more are not on this page (kprofctl report --markers lists them all).";
    }
    var refilter = function () { log.page = 0; renderLog(); };
    $("log-filter").addEventListener("input", refilter);
    $("log-window").addEventListener("change", refilter);
    $("log-prev").addEventListener("click", function () { log.page = Math.max(0, log.page - 1); renderLog(); });
    $("log-next").addEventListener("click", function () { log.page++; renderLog(); });
    $("log-table").tBodies[0].addEventListener("click", function (ev) {
      var tr = ev.target.closest("tr[data-mark]");
      if (tr) select(parseInt(tr.getAttribute("data-mark"), 10));
    });
  })();

  return {
    n: N,
    ofThread: function (profThread) { return byProf[profThread]; },
    others: others,
    height: height,
    label: function (t) { return threadLabel(t) + " marks"; },
    title: function (t) {
      return "marks of " + threadLabel(t) + " (pid " + t.pid + "): " + t.ticks.length + " marks, " + t.spans.length + " spans";
    },
    draw: draw,
    at: at,
    legend: legend,
    renderLog: renderLog,
    // For tests and scripts: the marks as the Log lists them, and the spans per thread.
    view: function () {
      return {
        marks: N,
        rows: rows().length,
        selected: log.selected,
        threads: threads.map(function (t) {
          return { pid: t.pid, tid: t.tid, ticks: t.ticks.length, spans: t.spans.map(function (s) {
            return { name: spanName(s), begin: time[spBegin[s]], end: spEnd[s] >= 0 ? time[spEnd[s]] : null, lane: spLane[s] };
          }) };
        })
      };
    }
  };
}
