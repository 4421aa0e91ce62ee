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
// Human-readable figures: sizes in binary units, durations from milliseconds, rates per second.
function fmtBytes(n) {
  n = Number(n);
  if (!isFinite(n) || n < 0) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(n < 10 ? 2 : 1)) + " " + units[i];
}
function fmtDuration(ms) {
  ms = Number(ms);
  if (!isFinite(ms) || ms < 0) return "-";
  if (ms < 1000) return Math.round(ms) + " ms";
  let s = Math.floor(ms / 1000);
  if (s < 60) return (ms / 1000).toFixed(1) + " s";
  const d = Math.floor(s / 86400); s -= d * 86400;
  const h = Math.floor(s / 3600); s -= h * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  return (d ? d + "d " : "") + (d || h ? h + "h " : "") + m + "m " + s + "s";
}
function fmtRate(r) {
  r = Number(r);
  if (!isFinite(r) || r < 0) return "-";
  return (r >= 100 ? r.toFixed(0) : r.toFixed(1)) + "/s";
}
function fmtTime(ms) { return ms > 0 ? new Date(Number(ms)).toLocaleString() : "-"; }
// sparkline draws series (arrays of numbers, same length) as an inline SVG, one polyline each
// with the given classes, scaled to the largest value; title says what it shows.
function sparkline(title, series, classes) {
  const NS = "http://www.w3.org/2000/svg", w = 240, h = 40;
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("width", w); svg.setAttribute("height", h); svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  const t = document.createElementNS(NS, "title");
  t.textContent = title;
  svg.append(t);
  const top = Math.max(1, ...series.flat().map(Number).filter(isFinite));
  series.forEach((s, k) => {
    if (s.length < 2) return;
    const pts = s.map((v, i) => (i * (w - 2) / (s.length - 1) + 1).toFixed(1) + "," + (h - 1 - (Number(v) || 0) * (h - 2) / top).toFixed(1));
    const pl = document.createElementNS(NS, "polyline");
    pl.setAttribute("points", pts.join(" "));
    pl.setAttribute("class", classes[k] || "");
    svg.append(pl);
  });
  return svg;
}
// link is an anchor to another node's status page at addr (host:port), opened as plain http.
function link(addr, text) {
  const a = el("a", "", text || addr);
  a.href = "http://" + addr + "/";
  return a;
}
// ratesBlock renders a StatusRates record: the rates now and the history as a sparkline.
function ratesBlock(r) {
  const hist = (r && r.history) || [];
  return el("div", "rates",
    el("span", "rate-in", "in " + fmtRate(r ? r.inPerSec : -1)), " · ",
    el("span", "rate-out", "out " + fmtRate(r ? r.outPerSec : -1)),
    " (messages, last " + fmtDuration(r ? r.windowMs : -1) + ") ",
    sparkline("messages per second, last " + fmtDuration(hist.length * (r ? r.intervalMs : 0)) + ": in (blue), out (green)",
      [hist.map(p => p.in), hist.map(p => p.out)], ["in", "out"]));
}
