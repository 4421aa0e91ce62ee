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
// fetchJSON reads one of the port's JSON endpoints. When the port requires a token
// (httpAuthToken), the first 401 asks for it once; it is kept for this tab only
// (sessionStorage) and sent as "Authorization: Bearer <token>".
let tokenAsked = false;
async function fetchJSON(url) {
  const token = sessionStorage.getItem("rocketraftHttpToken");
  const headers = token ? { Authorization: "Bearer " + token } : {};
  const r = await fetch(url, { cache: "no-store", headers });
  if (r.status === 401) {
    sessionStorage.removeItem("rocketraftHttpToken");
    if (!tokenAsked) {
      tokenAsked = true;
      const t = window.prompt("This port requires its token (httpAuthToken):");
      if (t) {
        sessionStorage.setItem("rocketraftHttpToken", t.trim());
        tokenAsked = false; // a wrong one is asked for again
      }
    }
    throw new Error("HTTP 401: the token is missing or wrong (reload to enter it again)");
  }
  if (!r.ok) throw new Error("HTTP " + r.status);
  return r.json();
}
