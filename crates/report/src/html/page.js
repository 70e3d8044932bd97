"use strict";
// Sortable tables: click a header; numbers sort by data-v, text by content.
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    th.addEventListener("click", function () {
      var desc = !th.classList.contains("desc");
      Array.prototype.forEach.call(heads, function (h) { h.classList.remove("asc", "desc"); });
      th.classList.add(desc ? "desc" : "asc");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var key = function (row) {
        var cell = row.cells[col];
        var v = cell.getAttribute("data-v");
        return v === null ? cell.textContent.toLowerCase() : parseFloat(v);
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var c = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
        return desc ? -c : c;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
// Filter boxes: hide rows of the named table whose text does not contain the query.
document.querySelectorAll("input.filter").forEach(function (input) {
  var table = document.getElementById(input.getAttribute("data-table"));
  input.addEventListener("input", function () {
    var q = input.value.toLowerCase();
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      row.style.display = row.textContent.toLowerCase().indexOf(q) < 0 ? "none" : "";
    });
  });
});
// Event chooser of the flamegraphs.
var chooser = document.getElementById("flame-event");
if (chooser) {
  chooser.addEventListener("change", function () {
    document.querySelectorAll(".flame-pane").forEach(function (pane) {
      pane.hidden = pane.getAttribute("data-event") !== chooser.value;
    });
  });
}
// Call tree: expand or collapse everything.
document.querySelectorAll("button[data-tree]").forEach(function (button) {
  button.addEventListener("click", function () {
    var open = button.getAttribute("data-tree") === "open";
    document.querySelectorAll(".tree details").forEach(function (d) { d.open = open; });
  });
});
// A link can carry a sort order: `report.html#sort=functions-table:3` sorts that table by
// its fourth column, descending (`:3:asc` ascending).
(function () {
  var m = /^#sort=([\w-]+):(\d+)(:asc)?$/.exec(window.location.hash);
  if (!m) return;
  var table = document.getElementById(m[1]);
  var th = table && table.tHead.rows[0].cells[parseInt(m[2], 10)];
  if (!th) return;
  th.click();
  if (m[3]) th.click();
})();
