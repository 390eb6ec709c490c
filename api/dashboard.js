"use strict";
// The dashboard's script, served as a file so that the page's Content-Security-Policy can allow
// scripts from 'self' only (no inline script, no inline event handlers).
//
// Everything the API returns is data, and data only ever reaches the page as text: rows are built
// with createElement and textContent, buttons get their handlers with addEventListener, URL path
// parts are encodeURIComponent-encoded. Never innerHTML, never HTML built from strings.
//
// The bearer token lives in this script's memory only (never localStorage or sessionStorage):
// a reload forgets it.
(() => {
  const REFRESH_MS = 5000;
  const $ = id => document.getElementById(id);
  let token = "";
  let generation = 0;  // the latest load; an older load that answers late draws nothing

  const namespace = () => $("ns").value.trim() || "default";
  const query = () => `?namespace=${encodeURIComponent(namespace())}`;
  const say = text => { $("msg").textContent = text; };
  const fail = text => { $("error").textContent = text; };

  function cell(value, className) {
    const td = document.createElement("td");
    td.textContent = value === null || value === undefined ? "" : String(value);
    if (className) td.className = className;
    return td;
  }

  function button(label, onClick) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", onClick);
    return b;
  }

  function fill(tbody, rows) {
    const frag = document.createDocumentFragment();
    for (const tr of rows) frag.appendChild(tr);
    tbody.replaceChildren(frag);
  }

  // The API's answer: {ok, status, data}; data is null when the body is not JSON (e.g. a proxy's error page).
  async function call(method, path, body) {
    const headers = {"Authorization": `Bearer ${token}`};
    const init = {method, headers, cache: "no-store"};
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let r;
    try {
      r = await fetch(path, init);
    } catch (e) {
      return {ok: false, status: 0, data: {detail: `the API did not answer: ${e}`}};
    }
    let data = null;
    try { data = await r.json(); } catch { data = null; }
    return {ok: r.ok, status: r.status, data};
  }

  // The API's `detail` as text: a string as is, anything else (a 422's list of problems) as JSON.
  function detail(res) {
    const d = res.data && typeof res.data === "object" ? res.data.detail : undefined;
    if (typeof d === "string") return d;
    if (d !== undefined) return JSON.stringify(d);
    return `HTTP ${res.status}`;
  }

  function runRow(x) {
    const tr = document.createElement("tr");
    tr.append(cell(x.name), cell(x.agent), cell(x.phase), cell(x.gate, x.gate === "pending" ? "pending" : ""),
              cell(x.gate_verdict));
    const actions = cell("");
    if (x.gate === "pending") {
      actions.append(button("Approve", () => verdict(x.name, "approve")),
                     button("Reject", () => verdict(x.name, "reject")));
    }
    tr.append(actions);
    return tr;
  }

  function scheduleRow(x) {
    const tr = document.createElement("tr");
    const cron = x.timezone && x.timezone !== "UTC" ? `${x.schedule} ${x.timezone}` : x.schedule;
    const phase = cell(x.phase);
    if (x.message) phase.title = String(x.message);
    const actions = cell("");
    actions.append(button(x.suspend ? "Resume" : "Pause", () => scheduleOp(x.name, x.suspend ? "resume" : "pause")),
                   button("Run now", () => scheduleOp(x.name, "trigger")));
    tr.append(cell(x.name), cell(x.agent), cell(cron), phase, cell(x.next_run_time), cell(x.last_run_name),
              cell(x.total_runs), actions);
    return tr;
  }

  async function load() {
    if (!token) {
      fail("Paste a bearer token to see runs and schedules.");
      return;
    }
    const mine = ++generation;
    const [runs, schedules] = await Promise.all([call("GET", `/api/v1/runs${query()}`),
                                                 call("GET", `/api/v1/schedules${query()}`)]);
    if (mine !== generation) return;
    const problems = [];
    if (runs.ok && Array.isArray(runs.data)) fill($("rows"), runs.data.map(runRow));
    else problems.push(`runs: ${detail(runs)}`);
    if (schedules.ok && Array.isArray(schedules.data)) fill($("schedules"), schedules.data.map(scheduleRow));
    else problems.push(`schedules: ${detail(schedules)}`);
    fail(problems.join("; "));
  }

  async function verdict(name, action) {
    const body = {action, reason: "dashboard"};
    if (action === "reject") {
      const response = prompt("Replacement response", "Response blocked by reviewer");
      if (response === null) return;  // cancelled
      body.response = response;
    }
    const res = await call("POST", `/api/v1/runs/${encodeURIComponent(name)}/gate-verdict${query()}`, body);
    say(`${name}: ${res.ok ? res.data.state : detail(res)}`);
    load();
  }

  async function scheduleOp(name, op) {
    const res = await call("POST", `/api/v1/schedules/${encodeURIComponent(name)}/${op}${query()}`);
    say(`${name}: ${res.ok ? (op === "trigger" ? detail(res) : `${op}d`) : detail(res)}`);
    load();
  }

  function takeToken() {
    token = $("token").value.trim();
    load();
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("refresh").addEventListener("click", takeToken);
    $("token").addEventListener("change", takeToken);
    $("ns").addEventListener("change", load);
    for (const id of ["token", "ns"]) {
      $(id).addEventListener("keydown", e => { if (e.key === "Enter") takeToken(); });
    }
    load();
    setInterval(() => { if (token) load(); }, REFRESH_MS);
  });
})();
