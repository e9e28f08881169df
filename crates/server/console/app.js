// The gatehouse console: one page, routed by the URL fragment, calling the admin API (`../v1`)
// with the session cookie. Every value from the API is put on the page as text
// (`textContent`), never as HTML, so a tool argument cannot run script.
"use strict";

const API = "../v1";
const POLL_MS = 1000;

let session = null; // {principal, roles, csrf_token, expires_at_ms}
let timer = null; // the current view's refresh

// ---- helpers -------------------------------------------------------------------------------

/** An element: h("a", {href: "#"}, "text", child...). Strings become text nodes. */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function main() {
  return document.getElementById("main");
}

/** Replaces the page's content; arrays are flattened, and null or false left out. */
function show(...children) {
  main().replaceChildren(h("div", {}, ...children));
}

function status(text) {
  document.getElementById("status").textContent = text || "";
}

/** Whether the session may do `role`'s work; `user`: a user signed in with their own
 * credential (their session names their tenant), who sees their own connections. */
function has(role) {
  if (role === "user") return !!session && !!session.tenant;
  return !!session && session.roles.includes(role);
}

/** Where a session starts. */
function home() {
  if (has("user")) return "#/connections";
  return has("approver") || has("auditor") ? "#/approvals" : "#/plugins";
}

function time(ms) {
  return ms ? new Date(ms).toLocaleString() : "";
}

function left(ms) {
  const s = Math.round((ms - Date.now()) / 1000);
  if (s <= 0) return "expired";
  if (s < 120) return `${s}s left`;
  if (s < 7200) return `${Math.round(s / 60)} min left`;
  return `${Math.round(s / 3600)} h left`;
}

function badge(state) {
  return h("span", { class: `badge state-${state}`, "data-state": state }, state);
}

function json(value) {
  return h("pre", {}, JSON.stringify(value, null, 2));
}

class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error;
  }
}

/** A request to the admin API; state-changing ones carry the CSRF token. */
async function api(method, path, body) {
  const headers = {};
  if (method !== "GET") headers["X-CSRF-Token"] = session ? session.csrf_token : "";
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path.startsWith("/") ? `.${path}` : `${API}/${path}`, {
    method,
    headers,
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let value = null;
  try {
    value = text ? JSON.parse(text) : null;
  } catch {
    value = { message: text };
  }
  if (response.status === 401 && path !== "/session") {
    session = null;
    location.hash = "#/signin";
    throw new ApiError(401, value);
  }
  if (!response.ok) throw new ApiError(response.status, value);
  return value;
}

function errorBox(error) {
  return h("div", { class: "error", role: "alert" }, error.message || String(error));
}

// ---- sign-in -------------------------------------------------------------------------------

function signIn() {
  const input = h("input", {
    id: "token",
    name: "token",
    type: "password",
    autocomplete: "current-password",
    required: true,
  });
  const problem = h("div", { "aria-live": "assertive" });
  const form = h(
    "form",
    {
      class: "card signin",
      id: "signin",
      onsubmit: async (event) => {
        event.preventDefault();
        problem.replaceChildren();
        try {
          session = await api("POST", "/session", { token: input.value });
          input.value = "";
          await start();
          const wanted = location.hash.startsWith("#/signin") || !location.hash ? home() : location.hash;
          if (location.hash === wanted) route();
          else location.hash = wanted;
        } catch (error) {
          problem.replaceChildren(errorBox(error));
        }
      },
    },
    h("h1", {}, "Sign in"),
    h("label", { for: "token" }, "Token"),
    input,
    h(
      "p",
      { class: "muted" },
      "An admin token (the gateway's [[admin.token]] entries: its roles decide what you can do here), or the credential your agent uses, to see and revoke the accounts you connected."
    ),
    h("button", { type: "submit", id: "signin-submit" }, "Sign in"),
    problem
  );
  show(form);
  input.focus();
}

async function signOut() {
  try {
    await api("DELETE", "/session");
  } catch {
    // Signed out either way.
  }
  session = null;
  renderChrome();
  location.hash = "#/signin";
}

function renderChrome() {
  const nav = document.getElementById("nav");
  const who = document.getElementById("who");
  nav.hidden = who.hidden = !session;
  if (!session) return;
  for (const link of nav.querySelectorAll("a")) {
    link.hidden = !link.dataset.role.split(" ").some(has);
  }
  document.getElementById("principal").textContent = session.tenant
    ? `${session.principal} (${session.tenant})`
    : `${session.principal} (${session.roles.join(", ")})`;
}

// ---- approvals -----------------------------------------------------------------------------

// One line of an approval's arguments, as the admin API shows them (policy redactions and a
// sensitive tool's masking applied), for triage without opening each.
function summary(a) {
  const args = a.call && a.call.args;
  if (!args || typeof args !== "object") return "";
  const line = Object.entries(args)
    .map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`)
    .join(", ");
  return line.length > 90 ? `${line.slice(0, 89)}…` : line;
}

function expiresText(a) {
  return a.state === "pending" ? left(a.expires_at_ms) : time(a.expires_at_ms);
}

function approvalRow(a) {
  return h(
    "tr",
    { "data-approval": a.id },
    h("td", { "data-label": "Tool" }, h("a", { href: `#/approvals/${encodeURIComponent(a.id)}` }, a.tool)),
    h("td", { "data-label": "Arguments", class: "mono summary", "data-field": "summary" }, summary(a)),
    h("td", { "data-label": "Tenant" }, a.tenant),
    h("td", { "data-label": "Asked by", class: "mono" }, a.principals.join(" → ")),
    h("td", { "data-label": "Mode" }, a.mode),
    h("td", { "data-label": "State", "data-field": "state" }, badge(a.state)),
    h("td", { "data-label": "Proposed" }, time(a.created_at_ms)),
    h("td", { "data-label": "Expires", "data-field": "expires" }, expiresText(a))
  );
}

function approvalTable(approvals, id) {
  if (!approvals.length) return h("p", { class: "muted", id }, "Nothing here.");
  return h(
    "table",
    { class: "responsive", id },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Tool", "Arguments", "Tenant", "Asked by", "Mode", "State", "Proposed", "Expires"].map((t) => h("th", {}, t))
      )
    ),
    h("tbody", {}, approvals.map(approvalRow))
  );
}

// Brings the live queue to `approvals` in place: a row that stays keeps its elements (a click on
// it lands where it was aimed), only its changing cells are rewritten; new rows are added in
// order, gone rows removed.
function updateQueue(holder, approvals) {
  const table = holder.querySelector("table#queue");
  if (!approvals.length || !table) {
    if (approvals.length || !holder.querySelector("p#queue")) holder.replaceChildren(approvalTable(approvals, "queue"));
    return;
  }
  const body = table.tBodies[0];
  const rows = new Map([...body.rows].map((row) => [row.dataset.approval, row]));
  const wanted = new Set(approvals.map((a) => a.id));
  for (const [id, row] of rows) if (!wanted.has(id)) row.remove();
  let previous = null;
  for (const a of approvals) {
    let row = rows.get(a.id);
    if (row) {
      row.querySelector('[data-field="expires"]').textContent = expiresText(a);
      const state = row.querySelector('[data-field="state"]');
      if (state.textContent !== a.state) state.replaceChildren(badge(a.state));
    } else {
      row = approvalRow(a);
    }
    const next = previous ? previous.nextSibling : body.firstChild;
    if (row !== next) body.insertBefore(row, next);
    previous = row;
  }
}

async function approvals() {
  const queue = h("div", { id: "queue-holder" }, h("p", { class: "muted" }, "Loading…"));
  const results = h("div", { id: "search-results" });
  const statusSelect = h(
    "select",
    { id: "search-status", name: "status" },
    ["all", "pending", "approved", "rejected", "executed", "expired"].map((s) => h("option", { value: s }, s))
  );
  const tenant = h("input", { id: "search-tenant", name: "tenant", placeholder: "any" });
  const tool = h("input", { id: "search-tool", name: "tool", placeholder: "any" });
  const search = async (event) => {
    if (event) event.preventDefault();
    try {
      // `expired` is not a stored status: it is pending or approved past its expiry.
      const wanted = statusSelect.value;
      const stored = wanted === "expired" ? "all" : wanted;
      const params = new URLSearchParams({ status: stored, limit: "200" });
      if (tenant.value) params.set("tenant", tenant.value);
      const found = (await api("GET", `approvals?${params}`)).approvals.filter(
        (a) => (wanted === "all" || a.state === wanted) && (!tool.value || a.tool.includes(tool.value))
      );
      results.replaceChildren(approvalTable(found, "search-table"));
    } catch (error) {
      results.replaceChildren(errorBox(error));
    }
  };
  show(
    h("h1", {}, "Waiting for a decision"),
    queue,
    h("h2", {}, "Search approvals"),
    h(
      "form",
      { class: "filters", id: "search", onsubmit: search },
      h("label", {}, "State", statusSelect),
      h("label", {}, "Tenant", tenant),
      h("label", {}, "Tool contains", tool),
      h("button", { type: "submit" }, "Search")
    ),
    results
  );
  const refresh = async () => {
    try {
      const pending = (await api("GET", "approvals?status=pending&limit=200")).approvals.filter(
        (a) => a.state === "pending"
      );
      updateQueue(queue, pending);
      status(`Queue updated ${new Date().toLocaleTimeString()}`);
    } catch (error) {
      queue.replaceChildren(errorBox(error));
    }
  };
  await refresh();
  timer = setInterval(refresh, POLL_MS);
}

function decisionList(decision) {
  if (!decision) return h("p", { class: "muted" }, "No policy decision was recorded for the proposing call.");
  return h(
    "table",
    { class: "responsive", id: "decisions" },
    h("thead", {}, h("tr", {}, ["Module", "Version", "Verdict", "Reasons"].map((t) => h("th", {}, t)))),
    h(
      "tbody",
      {},
      decision.modules.map((m) =>
        h(
          "tr",
          {},
          h("td", { "data-label": "Module" }, m.module_id),
          h("td", { "data-label": "Version", class: "mono" }, m.module ? `${m.module.version} ${m.module.digest}` : "missing"),
          h("td", { "data-label": "Verdict" }, m.verdict),
          h("td", { "data-label": "Reasons" }, m.reasons.map((r) => h("div", {}, `${r.code}: ${r.message}`)))
        )
      )
    )
  );
}

// How the caller of a pending approval waits for it (`waiting_on` in the admin API's view).
function waiting(a) {
  switch (a.waiting_on) {
    case "held":
      return `on a held request: the call runs as soon as it is approved (held until ${time(a.waiting_until_ms)})`;
    case "task":
      return "as a task: the gateway runs the call as soon as it is approved";
    default:
      return "for a retry: the call runs when the caller calls again after approval";
  }
}

async function approval(id) {
  let a;
  try {
    a = await api("GET", `approvals/${encodeURIComponent(id)}`);
  } catch (error) {
    show(h("h1", {}, "Approval"), errorBox(error));
    return;
  }
  const expires = h("dd", { id: "time-left" }, a.state === "pending" ? left(a.expires_at_ms) : time(a.expires_at_ms));
  const problem = h("div", { "aria-live": "assertive", id: "decide-problem" });
  const reason = h("textarea", { id: "reason", name: "reason" });
  const mine = session && a.principals.includes(session.principal);
  const decide = async (approve) => {
    problem.replaceChildren();
    if (!approve && !reason.value.trim()) {
      problem.replaceChildren(errorBox(new Error("A rejection needs a reason: the caller sees it.")));
      reason.focus();
      return;
    }
    try {
      await api("POST", `approvals/${encodeURIComponent(a.id)}/${approve ? "approve" : "reject"}`, {
        reason: reason.value,
      });
      await approval(a.id);
      status(approve ? "Approved." : "Rejected.");
    } catch (error) {
      problem.replaceChildren(errorBox(error));
    }
  };
  let controls = null;
  if (has("approver") && a.state === "pending") {
    controls = h(
      "section",
      { class: "card", "aria-labelledby": "decide-title" },
      h("h2", { id: "decide-title" }, "Decide"),
      mine
        ? h(
            "p",
            { class: "note", id: "self-approval" },
            `You (${session.principal}) are in this call's requesting chain, so you cannot approve or reject it: another approver must (separation of duties).`
          )
        : null,
      h("label", { for: "reason" }, "Reason (required to reject; the caller sees it)"),
      reason,
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", id: "approve", disabled: mine, onclick: () => decide(true) }, "Approve"),
        h("button", { type: "button", id: "reject", class: "danger", disabled: mine, onclick: () => decide(false) }, "Reject")
      ),
      problem
    );
  }
  show(
    h("p", {}, h("a", { href: "#/approvals" }, "← All approvals")),
    h("h1", {}, `Approval ${a.id} `, badge(a.state)),
    h(
      "div",
      { class: "card" },
      h(
        "dl",
        { id: "approval" },
        h("dt", {}, "Tool"),
        h("dd", { id: "tool", class: "mono" }, a.tool),
        h("dt", {}, "Tenant"),
        h("dd", { id: "tenant" }, a.tenant),
        h("dt", {}, "Asked by"),
        h("dd", { id: "principals", class: "mono" }, a.principals.join(" → ")),
        h("dt", {}, "Declared mode"),
        h("dd", { id: "declared-mode" }, a.declared_mode || "(tool no longer served)"),
        h("dt", {}, "Effective mode"),
        h("dd", { id: "effective-mode" }, a.mode),
        h("dt", {}, "Why"),
        h("dd", { id: "reasons" }, a.reasons.map((r) => h("div", {}, r))),
        h("dt", {}, "Proposed"),
        h("dd", {}, time(a.created_at_ms)),
        h("dt", {}, a.state === "pending" ? "Time left" : "Expires"),
        expires,
        a.state === "pending" ? [h("dt", {}, "The caller waits"), h("dd", { id: "waiting" }, waiting(a))] : null,
        a.decided_by
          ? [
              h("dt", {}, "Decided by"),
              h(
                "dd",
                { id: "decided-by" },
                `${a.decided_by}${a.decided_as === "consent" ? " (the caller's own consent)" : a.decided_as === "caller" ? " (withdrawn by the caller)" : ""} at ${time(a.decided_at_ms)}`
              ),
            ]
          : null,
        a.decided_reason ? [h("dt", {}, "Decision reason"), h("dd", { id: "decided-reason" }, a.decided_reason)] : null,
        a.executed_by_call ? [h("dt", {}, "Executed by"), h("dd", { class: "mono" }, a.executed_by_call)] : null
      )
    ),
    h("h2", {}, "Arguments"),
    h(
      "p",
      { class: "muted" },
      a.sensitive && !a.revealed
        ? "This tool's arguments are sensitive: shown as their hashes. Policy redactions and masked personal data apply too."
        : "As the policies let people see them: redacted values and personal data are masked."
    ),
    h("pre", { id: "args" }, JSON.stringify(a.call.args, null, 2)),
    a.sensitive && !a.revealed && has("approver")
      ? h(
          "p",
          {},
          h(
            "button",
            {
              type: "button",
              id: "reveal",
              onclick: async () => {
                try {
                  const shown = await api("GET", `approvals/${encodeURIComponent(a.id)}?reveal=true`);
                  document.getElementById("args").textContent = JSON.stringify(shown.call.args, null, 2);
                  status("Revealed; the audit log records that you saw them.");
                } catch (error) {
                  status(error.message || String(error));
                }
              },
            },
            "Reveal (audited)"
          )
        )
      : null,
    h("h2", {}, "Policy decisions"),
    decisionList(a.policy_decision),
    controls
  );
  if (a.state === "pending") {
    timer = setInterval(() => {
      expires.textContent = left(a.expires_at_ms);
    }, POLL_MS);
  }
}

// ---- audit ---------------------------------------------------------------------------------

const AUDIT_FILTERS = ["tool", "tenant", "principal", "outcome", "kind"];

async function audit() {
  const inputs = {};
  for (const name of AUDIT_FILTERS) inputs[name] = h("input", { id: `audit-${name}`, name, placeholder: "any" });
  inputs.since = h("input", { id: "audit-since", name: "since", type: "datetime-local" });
  inputs.until = h("input", { id: "audit-until", name: "until", type: "datetime-local" });
  const results = h("div", { id: "audit-results" });
  const verify = h("div", { id: "verify-result", "aria-live": "polite" });
  const exportLink = h("a", { class: "button secondary", id: "export", href: `${API}/audit/export`, download: "gatehouse-audit.jsonl" }, "Export JSON lines");
  const params = () => {
    const p = new URLSearchParams();
    for (const name of AUDIT_FILTERS) if (inputs[name].value) p.set(name, inputs[name].value);
    if (inputs.since.value) p.set("since_ms", String(new Date(inputs.since.value).getTime()));
    if (inputs.until.value) p.set("until_ms", String(new Date(inputs.until.value).getTime()));
    return p;
  };
  const rows = h("tbody", {});
  const more = h("button", { type: "button", class: "secondary", id: "more", hidden: true }, "Load more");
  let next = null;
  const load = async (append) => {
    const p = params();
    exportLink.href = `${API}/audit/export?${p}`;
    p.set("limit", "100");
    if (append && next) p.set("after_seq", String(next));
    try {
      const page = await api("GET", `audit?${p}`);
      if (!append) rows.replaceChildren();
      for (const e of page.entries) rows.append(auditRow(e));
      next = page.next_after_seq;
      more.hidden = !next;
      results.replaceChildren(
        rows.children.length
          ? h(
              "table",
              { class: "responsive", id: "audit-table" },
              h("thead", {}, h("tr", {}, ["#", "Time", "Kind", "Tool", "Tenant", "Principal", "Outcome", "Detail"].map((t) => h("th", {}, t)))),
              rows
            )
          : h("p", { class: "muted" }, "No entries match."),
        more
      );
    } catch (error) {
      results.replaceChildren(errorBox(error));
    }
  };
  more.addEventListener("click", () => load(true));
  show(
    h("h1", {}, "Audit log"),
    h(
      "form",
      { class: "filters", id: "audit-filters", onsubmit: (e) => { e.preventDefault(); load(false); } },
      AUDIT_FILTERS.map((name) => h("label", {}, name[0].toUpperCase() + name.slice(1), inputs[name])),
      h("label", {}, "Since", inputs.since),
      h("label", {}, "Until", inputs.until),
      h("button", { type: "submit" }, "Filter"),
      exportLink
    ),
    h(
      "div",
      { class: "actions" },
      h(
        "button",
        {
          type: "button",
          id: "verify",
          class: "secondary",
          onclick: async () => {
            verify.replaceChildren(h("p", { class: "muted" }, "Verifying the whole chain…"));
            try {
              const report = await api("GET", "audit/verify");
              verify.replaceChildren(
                h(
                  "div",
                  { class: report.ok ? "card ok" : "error", id: "verify-message", "data-ok": String(report.ok) },
                  report.message,
                  report.first_break ? json(report.first_break) : null
                )
              );
            } catch (error) {
              verify.replaceChildren(errorBox(error));
            }
          },
        },
        "Verify chain"
      )
    ),
    verify,
    results
  );
  await load(false);
}

function auditDetail(e) {
  const r = e.record || {};
  if (e.kind === "approval") return `${r.decision || ""} by ${r.by || "?"}${r.reason ? `: ${r.reason}` : ""}`;
  if (e.kind === "plugin") return `${r.action || ""} ${(r.plugin && `${r.plugin.id} ${r.plugin.version}`) || r.module || ""}`;
  const replayOf = r.result && r.result.replay_of;
  return `${e.tool_call_id || ""}${replayOf ? ` (replays ${replayOf})` : ""}`;
}

function auditRow(e) {
  const call = e.tool_call_id
    ? h("a", { href: `#/audit/call/${encodeURIComponent(e.tool_call_id)}` }, String(e.seq))
    : String(e.seq);
  return h(
    "tr",
    { "data-seq": e.seq },
    h("td", { "data-label": "#" }, call),
    h("td", { "data-label": "Time" }, time(e.at_ms)),
    h("td", { "data-label": "Kind" }, e.kind),
    h("td", { "data-label": "Tool", class: "mono" }, e.tool || ""),
    h("td", { "data-label": "Tenant" }, e.tenant || ""),
    h("td", { "data-label": "Principal", class: "mono" }, e.principal || ""),
    h("td", { "data-label": "Outcome" }, e.outcome || ""),
    h("td", { "data-label": "Detail" }, auditDetail(e))
  );
}

async function auditCall(id) {
  try {
    const entries = (await api("GET", `audit?tool_call_id=${encodeURIComponent(id)}`)).entries;
    const replays = (await api("GET", `audit?replay_of=${encodeURIComponent(id)}`)).entries;
    const decisions = entries
      .map((e) => e.record && e.record.result && e.record.result.policy_decision)
      .filter(Boolean);
    show(
      h("p", {}, h("a", { href: "#/audit" }, "← Audit log")),
      h("h1", {}, `Call ${id}`),
      h("h2", {}, "Policy modules that decided it"),
      decisions.length ? decisions.map(decisionList) : h("p", { class: "muted" }, "No policy decision recorded."),
      h("h2", {}, "Entries"),
      h(
        "table",
        { class: "responsive", id: "call-entries" },
        h("thead", {}, h("tr", {}, ["#", "Time", "Kind", "Tool", "Tenant", "Principal", "Outcome", "Detail"].map((t) => h("th", {}, t)))),
        h("tbody", {}, entries.map(auditRow))
      ),
      h("h2", {}, `Replays (${replays.length})`),
      replays.length
        ? h("table", { class: "responsive", id: "replays" }, h("tbody", {}, replays.map(auditRow)))
        : h("p", { class: "muted" }, "No call replayed this one's result."),
      h("h2", {}, "Full record"),
      entries.map(json)
    );
  } catch (error) {
    show(h("h1", {}, `Call ${id}`), errorBox(error));
  }
}

// ---- sessions ------------------------------------------------------------------------------

/** A session's page: `#/sessions/<tenant>/<principal>/<key>` (an empty key: the window). */
function sessionHref(s) {
  return `#/sessions/${[s.tenant, s.principal, s.key].map(encodeURIComponent).join("/")}`;
}

function sessionState(s) {
  return s.ended_ms ? "ended" : s.live ? "live" : "expired";
}

function labelList(labels) {
  return labels.length
    ? labels.map((l) => h("span", { class: "badge label", "data-label": l.label || l }, l.label || l))
    : h("span", { class: "muted" }, "none");
}

async function sessions() {
  let listing;
  try {
    listing = await api("GET", "sessions?limit=200");
  } catch (error) {
    show(h("h1", {}, "Sessions"), errorBox(error));
    return;
  }
  show(
    h("h1", {}, "Sessions"),
    h(
      "p",
      { class: "muted" },
      "Each caller's calls under one key (an MCP session, a trace id, or the caller's window), with the labels their results brought. Flow rules judge a call by them."
    ),
    listing.sessions.length
      ? h(
          "table",
          { class: "responsive", id: "sessions-table" },
          h("thead", {}, h("tr", {}, ["Principal", "Tenant", "Key", "Started", "State", "Labels"].map((t) => h("th", {}, t)))),
          h(
            "tbody",
            {},
            listing.sessions.map((s) =>
              h(
                "tr",
                { "data-key": s.key },
                h("td", { "data-label": "Principal", class: "mono" }, h("a", { href: sessionHref(s) }, s.principal)),
                h("td", { "data-label": "Tenant" }, s.tenant),
                h("td", { "data-label": "Key", class: "mono" }, s.key || "(window)"),
                h("td", { "data-label": "Started" }, time(s.started_ms)),
                h("td", { "data-label": "State" }, badge(sessionState(s))),
                h("td", { "data-label": "Labels" }, labelList(s.labels))
              )
            )
          )
        )
      : h("p", { class: "muted" }, "No sessions yet.")
  );
}

async function sessionTimeline(tenant, principal, key) {
  const query = new URLSearchParams({ tenant, principal, key });
  const problem = h("div", { "aria-live": "assertive", id: "session-problem" });
  let view;
  try {
    view = await api("GET", `sessions/timeline?${query}&limit=200`);
  } catch (error) {
    show(h("p", {}, h("a", { href: "#/sessions" }, "← All sessions")), h("h1", {}, "Session"), errorBox(error));
    return;
  }
  const s = view.session;
  const end = async () => {
    try {
      await api("POST", `sessions/end?${query}`);
      await sessionTimeline(tenant, principal, key);
      status("The session ended: its next call starts a new one, with no labels.");
    } catch (error) {
      problem.replaceChildren(errorBox(error));
    }
  };
  show(
    h("p", {}, h("a", { href: "#/sessions" }, "← All sessions")),
    h("h1", {}, `Session of ${s.principal}`),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Tenant"), h("dd", {}, s.tenant),
      h("dt", {}, "Key"), h("dd", { class: "mono" }, s.key || "(the principal's window)"),
      h("dt", {}, "Started"), h("dd", {}, time(s.started_ms)),
      h("dt", {}, "State"), h("dd", { id: "session-state" }, badge(sessionState(s)))
    ),
    h("h2", {}, "Labels"),
    s.labels.length
      ? h(
          "ul",
          { id: "session-labels" },
          s.labels.map((l) =>
            h("li", {}, labelList([l]), " from ", h("span", { class: "mono" }, l.tool), " (", h("a", { href: `#/audit/call/${encodeURIComponent(l.tool_call_id)}` }, l.tool_call_id), ")")
          )
        )
      : h("p", { class: "muted" }, "None."),
    has("operator") && !s.ended_ms && s.live
      ? h("div", { class: "actions" }, h("button", { type: "button", class: "danger", id: "end-session", onclick: end }, "End session"))
      : null,
    problem,
    h("h2", {}, `Actions (${view.actions.length}), newest first`),
    h(
      "table",
      { class: "responsive", id: "session-actions" },
      h("thead", {}, h("tr", {}, ["#", "Time", "Tool", "Outcome", "Labels it brought"].map((t) => h("th", {}, t)))),
      h(
        "tbody",
        {},
        view.actions.map((a) =>
          h(
            "tr",
            { "data-seq": a.seq },
            h("td", { "data-label": "#" }, h("a", { href: `#/audit/call/${encodeURIComponent(a.tool_call_id)}` }, String(a.seq))),
            h("td", { "data-label": "Time" }, time(a.at_ms)),
            h("td", { "data-label": "Tool", class: "mono" }, a.tool),
            h("td", { "data-label": "Outcome" }, a.outcome),
            h("td", { "data-label": "Labels it brought" }, a.labels.length ? labelList(a.labels) : "")
          )
        )
      )
    )
  );
}

// ---- plugins -------------------------------------------------------------------------------

function pluginCells(p) {
  return [
    h("td", { "data-label": "Id", class: "mono" }, p.id),
    h("td", { "data-label": "Version" }, p.version),
    h("td", { "data-label": "Digest", class: "mono" }, p.digest),
    h("td", { "data-label": "Publisher key", class: "mono" }, p.key_id),
  ];
}

async function plugins() {
  let listing;
  try {
    listing = await api("GET", "plugins");
  } catch (error) {
    show(h("h1", {}, "Plugins"), errorBox(error));
    return;
  }
  const dialog = h("dialog", { id: "confirm", "aria-labelledby": "confirm-title" });
  const problem = h("div", { "aria-live": "assertive", id: "plugins-problem" });
  // Asks before a change to what the gateway serves: `act` is the POST path under /v1/; the
  // buttons are `#confirm-<name>` and `#cancel-<name>`.
  const confirmThen = ({ name, title, text, label, act, done }) => {
    dialog.replaceChildren(
      h(
        "form",
        { method: "dialog" },
        h("h2", { id: "confirm-title" }, title),
        h("p", {}, text),
        h(
          "div",
          { class: "actions" },
          h(
            "button",
            {
              type: "button",
              id: `confirm-${name}`,
              class: "danger",
              onclick: async () => {
                dialog.close();
                try {
                  await api("POST", act);
                  await plugins();
                  status(done);
                } catch (error) {
                  problem.replaceChildren(errorBox(error));
                }
              },
            },
            label
          ),
          h("button", { type: "submit", class: "secondary", id: `cancel-${name}` }, "Cancel")
        )
      )
    );
    dialog.showModal();
  };
  const rollback = (p) => {
    const to = p.previous[p.previous.length - 1];
    confirmThen({
      name: "rollback",
      title: "Roll back a policy module",
      text: `Serve ${p.id} ${to.version} (${to.digest}) again, in place of ${p.version}? Calls from now on are decided by it; the change is recorded in the audit log.`,
      label: "Roll back",
      act: `policies/${encodeURIComponent(p.id)}/rollback`,
      done: `Rolled ${p.id} back to ${to.version}.`,
    });
  };
  const promote = (p) =>
    confirmThen({
      name: "promote",
      title: "Promote a shadow policy",
      text: `Make the ${p.shadow_bindings} shadow binding(s) of ${p.id} ${p.version} enforcing? Its verdicts decide calls from now on; the change is recorded in the audit log. Set mode = "enforce" in the config too, or a restart from a fresh state store puts it back in shadow.`,
      label: "Promote",
      act: `policies/${encodeURIComponent(p.id)}/promote`,
      done: `${p.id} is enforcing.`,
    });
  let history = null;
  if (has("auditor")) {
    try {
      history = (await api("GET", "audit?kind=plugin&limit=200")).entries;
    } catch {
      history = null;
    }
  }
  show(
    h("h1", {}, "Plugins"),
    problem,
    h("h2", {}, "Adapters"),
    h(
      "table",
      { class: "responsive", id: "adapters" },
      h("thead", {}, h("tr", {}, ["Id", "Version", "Digest", "Publisher key"].map((t) => h("th", {}, t)))),
      h("tbody", {}, listing.adapters.map((p) => h("tr", {}, pluginCells(p))))
    ),
    h("h2", {}, "Policy modules"),
    h(
      "table",
      { class: "responsive", id: "policies" },
      h("thead", {}, h("tr", {}, ["Id", "Version", "Digest", "Publisher key", "Binding configs", "Mode", "Earlier versions", ""].map((t) => h("th", {}, t)))),
      h(
        "tbody",
        {},
        listing.policies.map((p) =>
          h(
            "tr",
            { "data-policy": p.id },
            pluginCells(p),
            h("td", { "data-label": "Binding configs", class: "mono" }, p.configs.map((c) => h("div", {}, JSON.stringify(c)))),
            h("td", { "data-label": "Mode", class: "mode" }, p.shadow_bindings ? `shadow (${p.shadow_bindings})` : "enforcing"),
            h("td", { "data-label": "Earlier versions" }, p.previous.map((v) => v.version).join(", ") || "none"),
            h(
              "td",
              {},
              has("operator") && p.shadow_bindings
                ? h("button", { type: "button", class: "promote", "data-policy": p.id, onclick: () => promote(p) }, "Promote…")
                : null,
              has("operator") && p.previous.length
                ? h("button", { type: "button", class: "secondary rollback", "data-policy": p.id, onclick: () => rollback(p) }, "Roll back…")
                : null
            )
          )
        )
      )
    ),
    listing.stdio && listing.stdio.length
      ? [
          h("h2", {}, "Stdio servers"),
          h(
            "table",
            { class: "responsive", id: "stdio" },
            h("thead", {}, h("tr", {}, ["Adapter", "State", "Process", "User", "Restarts", "Last failure", "Runs"].map((t) => h("th", {}, t)))),
            h(
              "tbody",
              {},
              listing.stdio.map((s) =>
                h(
                  "tr",
                  { "data-adapter": s.adapter },
                  h("td", { "data-label": "Adapter", class: "mono" }, s.adapter),
                  h("td", { "data-label": "State" }, s.bare ? `${s.state.replace("_", " ")} (no sandbox)` : s.state.replace("_", " ")),
                  h("td", { "data-label": "Process", class: "mono" }, s.pids.length === 0 ? "none" : s.pids.join(" ")),
                  h("td", { "data-label": "User", class: "mono" }, s.uid == null ? "the gateway's" : `uid ${s.uid}`),
                  h("td", { "data-label": "Restarts" }, String(s.restarts)),
                  h("td", { "data-label": "Last failure" }, s.last_failure || "none"),
                  h("td", { "data-label": "Runs", class: "mono" }, s.command.join(" "))
                )
              )
            )
          ),
        ]
      : null,
    history
      ? [
          h("h2", {}, "History of changes"),
          history.length
            ? h(
                "table",
                { class: "responsive", id: "history" },
                h("thead", {}, h("tr", {}, ["#", "Time", "Kind", "Tool", "Tenant", "By", "Outcome", "Change"].map((t) => h("th", {}, t)))),
                h("tbody", {}, history.map(auditRow))
              )
            : h("p", { class: "muted" }, "No plugin has changed since the gateway started recording."),
        ]
      : null,
    dialog
  );
}

// ---- a user's own connections ------------------------------------------------------------

/** The accounts the signed-in user connected upstream (`/v1/me/connections`), each with a
 * button that revokes it. */
async function connections() {
  let listing;
  try {
    listing = await api("GET", "me/connections");
  } catch (error) {
    show(h("h1", {}, "My connections"), errorBox(error));
    return;
  }
  const problem = h("div", { "aria-live": "assertive", id: "connections-problem" });
  const rows = listing.connections.map((c) =>
    h(
      "tr",
      { "data-provider": c.provider },
      h("td", { "data-label": "Provider", class: "mono" }, c.provider),
      h("td", { "data-label": "Scopes" }, c.scope),
      h("td", { "data-label": "Connected" }, time(c.created_at_ms)),
      h("td", { "data-label": "Expires" }, c.expires_at_ms ? time(c.expires_at_ms) : "never"),
      h(
        "td",
        {},
        h(
          "button",
          {
            type: "button",
            class: "danger",
            id: `revoke-${c.provider}`,
            onclick: async () => {
              problem.replaceChildren();
              try {
                await api("POST", `me/connections/revoke?provider=${encodeURIComponent(c.provider)}`);
                status(`Your ${c.provider} account is no longer connected.`);
                connections();
              } catch (error) {
                problem.replaceChildren(errorBox(error));
              }
            },
          },
          "Revoke"
        )
      )
    )
  );
  show(
    h("h1", {}, "My connections"),
    h(
      "p",
      { class: "muted" },
      "The accounts you connected for tools that act as you upstream. Revoking one forgets its tokens here and revokes them at the provider where it can; a tool that needs it asks you to connect again."
    ),
    rows.length
      ? h(
          "table",
          { id: "connections" },
          h(
            "thead",
            {},
            h("tr", {}, ...["Provider", "Scopes", "Connected", "Expires", ""].map((t) => h("th", {}, t)))
          ),
          h("tbody", {}, ...rows)
        )
      : h("p", { id: "no-connections" }, "No connected accounts."),
    problem
  );
}

// ---- routing -------------------------------------------------------------------------------

async function route() {
  if (timer) clearInterval(timer);
  timer = null;
  status("");
  const [, section, ...rest] = (location.hash || "#/").split("/");
  for (const link of document.querySelectorAll("nav a")) {
    if (link.getAttribute("href") === `#/${section}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (!session) return signIn();
  const id = rest.map(decodeURIComponent).join("/");
  switch (section) {
    case "approvals":
      return id ? approval(id) : approvals();
    case "audit":
      return rest[0] === "call" ? auditCall(decodeURIComponent(rest[1] || "")) : audit();
    case "plugins":
      return plugins();
    case "sessions": {
      if (!rest.length) return sessions();
      const [tenant, principal, key] = rest.map(decodeURIComponent);
      return sessionTimeline(tenant || "", principal || "", key || "");
    }
    case "connections":
      return connections();
    default:
      location.hash = home();
  }
}

async function start() {
  try {
    session = await api("GET", "/session");
  } catch {
    session = null;
  }
  renderChrome();
}

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("sign-out").addEventListener("click", signOut);
  window.addEventListener("hashchange", route);
  await start();
  route();
});
