"use strict";
// Shared by the broker's and the name server's status pages (webui package). Every value is
// rendered through text nodes (textContent), never as HTML.
function el(tag, cls, ...kids) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k === undefined || k === null ? "-" : String(k)));
  return e;
}
function table(head, rows, numeric) {
  const t = el("table");
  const hr = el("tr");
  head.forEach(h => hr.append(el("th", "", h)));
  t.append(hr);
  for (const r of rows) {
    const tr = el("tr", r.cls || "");
    r.cells.forEach((c, i) => tr.append(el("td", numeric && numeric[i] ? "num" : "", c)));
    t.append(tr);
  }
  return t;
}
