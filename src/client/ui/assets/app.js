// ckpt ui: the timeline page. Every text that comes from the store (prompts, file names,
// contents) is put on the page with textContent, never parsed as markup.
"use strict";

const ROW = 58; // px per timeline entry (the list renders only the entries in view)
const state = {
  project: null,
  all: [],        // every checkpoint, newest first
  shown: [],      // those the filter keeps
  cursor: -1,     // index in `shown` of the highlighted entry
  open: null,     // the checkpoint whose details are shown
  base: null,     // the checkpoint to compare the open one with, when comparing
  view: null,     // "turn": what a prompt's turn changed; "own": since the previous checkpoint
                  // (null: a prompt's turn first, anything else's own changes)
  events: null,
  agents: new Map(), // dialog → the agent that sent its prompts (from its newest checkpoint)
};

const $ = (id) => document.getElementById(id);

// The token comes in the address's fragment (`#token=…`), which the browser never sends to a
// server; it is kept for this tab only (a reload keeps working) and sent as a header with each
// request. It is never a cookie: a browser sends 127.0.0.1's cookies to every port of it.
const TOKEN = (() => {
  const given = new URLSearchParams(location.hash.slice(1)).get("token")
    || new URLSearchParams(location.search).get("token");
  if (given) {
    sessionStorage.setItem("ckpt-ui-token", given);
    history.replaceState(null, "", location.pathname);
  }
  return given || sessionStorage.getItem("ckpt-ui-token") || "";
})();

function auth(extra) {
  return Object.assign({ Authorization: `Bearer ${TOKEN}` }, extra || {});
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

// A file name as it is, its control characters spelled out: a newline in a name would look
// like a space, and two files would look like one.
function shownPath(path) {
  return String(path).replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => {
    if (c === "\n") return "\\n";
    if (c === "\t") return "\\t";
    return "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0");
  });
}

function button(text, testid, onclick, cls) {
  const b = el("button", cls || "", text);
  b.type = "button";
  if (testid) b.dataset.testid = testid;
  b.addEventListener("click", onclick);
  return b;
}

async function answer(response) {
  let body = null;
  try { body = await response.json(); } catch (_) { /* not JSON */ }
  if (!response.ok) {
    const message = body && body.error && body.error.message ? body.error.message : response.statusText;
    throw new Error(message);
  }
  return body;
}

async function get(path, params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null) query.set(k, v);
  }
  return answer(await fetch(`/api/${path}?${query}`, { headers: auth(), credentials: "omit" }));
}

async function post(path, body) {
  return answer(await fetch(`/api/${path}`, {
    method: "POST",
    credentials: "omit",
    headers: auth({ "Content-Type": "application/json" }),
    body: JSON.stringify(body),
  }));
}

function toast(message) {
  const t = $("toast");
  t.textContent = message;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 8000);
}

function ago(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return `${Math.floor(s)}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

// A prompt's turn, as `ckpt log` counts it, when the list carries it; else the entry itself (a
// step's `turn` names the prompt it belongs to).
function turnOf(c) {
  return c.turn && typeof c.turn === "object" ? c.turn : c;
}

function title(c) {
  if (c.label) return c.label;
  return c.kind === "message" ? "(prompt without text)" : `(${c.kind.replace("_", " ")})`;
}

function counts(c) {
  return `+${c.added} ~${c.modified} −${c.deleted}`;
}

// --- projects ---------------------------------------------------------------------------

async function loadProjects() {
  const { projects, start } = await get("projects");
  const select = $("project");
  select.replaceChildren();
  let chosen = null;
  for (const p of projects) {
    const root = String(p.root);
    const option = el("option", "", root + (p.available ? "" : " (missing)"));
    option.value = root;
    select.append(option);
    const inside = start === root || String(start).startsWith(root.endsWith("/") ? root : root + "/");
    if (inside && (!chosen || root.length > chosen.length)) chosen = root;
  }
  if (!projects.length) {
    $("detail").replaceChildren(el("p", "muted", "No project is watched yet: run `ckpt watch` in one."));
    return;
  }
  select.value = chosen || String(projects[0].root);
  select.addEventListener("change", () => openProject(select.value));
  await openProject(select.value);
}

async function openProject(root) {
  state.project = root;
  state.all = [];
  state.open = null;
  state.base = null;
  state.cursor = -1;
  state.agents = new Map();
  $("detail").replaceChildren(el("p", "muted", "Select an entry (↑/↓ to move, Enter to open)."));
  // The first screen from the newest entries, then the whole timeline.
  const first = await get("list", { project: root, limit: 100 });
  if (state.project !== root) return;
  state.all = first;
  refilter();
  subscribe(root);
  const all = await get("list", { project: root });
  if (state.project !== root) return;
  state.all = all;
  refilter();
  loadAgents(root);
}

// Which agent each dialog's prompts came from: one look at each dialog's newest checkpoint
// (the hook keeps its input there), at most 50 dialogs.
async function loadAgents(root) {
  const newest = new Map();
  for (const c of state.all) if (!newest.has(c.dialog)) newest.set(c.dialog, c.id);
  for (const [dialog, id] of [...newest].slice(0, 50)) {
    if (state.agents.has(dialog)) continue;
    const shown = await get("show", { project: root, id }).catch(() => null);
    if (state.project !== root) return;
    const agent = shown && shown.meta && shown.meta.ckpt_agent;
    state.agents.set(dialog, agent || "");
    if (agent) renderRows();
  }
}

// --- live updates -----------------------------------------------------------------------

// The event stream is read with fetch (an EventSource cannot send the token's header); it is
// reopened after a failure, and what happened while it was down is fetched then.
function subscribe(root) {
  if (state.events) state.events.abort();
  const control = new AbortController();
  state.events = control;
  const live = (text) => { if (state.events === control) $("live").textContent = text; };
  const onEvent = (data) => {
    let event;
    try { event = JSON.parse(data); } catch (_) { return; }
    if (event.event === "file_changed") return;
    clearTimeout(subscribe.timer);
    subscribe.timer = setTimeout(() => refreshNewest(root), 100);
  };
  (async () => {
    let first = true;
    while (!control.signal.aborted) {
      try {
        const query = new URLSearchParams({ project: root });
        const response = await fetch(`/api/events?${query}`, { headers: auth(), credentials: "omit", signal: control.signal });
        if (!response.ok) throw new Error(response.statusText);
        live("● live");
        if (!first && state.all.length) refreshNewest(root);
        first = false;
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = block.split("\n").filter((l) => l.startsWith("data:"))
              .map((l) => l.slice(5).replace(/^ /, "")).join("\n");
            if (data) onEvent(data);
          }
        }
      } catch (_) {
        if (control.signal.aborted) return;
      }
      first = false;
      live("○ reconnecting…");
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  })();
}

// Adds the checkpoints newer than the newest shown.
async function refreshNewest(root) {
  const newest = await get("list", { project: root, limit: 200 }).catch((e) => { toast(e.message); return null; });
  if (!newest || state.project !== root) return;
  const known = new Set(state.all.map((c) => c.id));
  const fresh = newest.filter((c) => !known.has(c.id));
  if (!fresh.length) return;
  const openId = state.shown[state.cursor] && state.shown[state.cursor].id;
  state.all = fresh.concat(state.all);
  refilter(openId);
}

// --- the timeline -----------------------------------------------------------------------

// The dialogs (agent sessions) of the timeline, newest first, in the dialog menu.
// Each dialog as a person knows it: by its first prompt (an agent names a session by a UUID),
// and, for the session a rewind forked, as a fork of the one it came from (the rewind notes
// that on its restore checkpoint).
function nameDialogs() {
  const first = new Map();
  const forkedFrom = new Map();
  for (let i = state.all.length - 1; i >= 0; i--) {
    const c = state.all[i];
    if (c.kind === "message" && c.label && !first.has(c.dialog)) {
      const line = c.label.split("\n")[0];
      first.set(c.dialog, line.length > 40 ? `${line.slice(0, 40)}…` : line);
    }
    for (const note of (c.notes || "").split("\n")) {
      const m = /^conversation forked: \S+ session (\S+) from session (\S+)/.exec(note);
      if (m) forkedFrom.set(m[1], m[2]);
    }
  }
  const named = (d) => (first.has(d) ? `“${first.get(d)}”` : d);
  state.dialogNames = new Map();
  for (const d of new Set(state.all.map((c) => c.dialog))) {
    const from = forkedFrom.get(d);
    state.dialogNames.set(d, from ? `fork of ${named(from)}: ${named(d)}` : named(d));
  }
}

function dialogName(d) {
  return (state.dialogNames && state.dialogNames.get(d)) || d;
}

function listDialogs() {
  const select = $("dialog");
  const chosen = select.value;
  const seen = [...new Set(state.all.map((c) => c.dialog))];
  const options = [el("option", "", `all ${seen.length} dialog${seen.length === 1 ? "" : "s"}`)];
  options[0].value = "";
  for (const d of seen) {
    const option = el("option", "", dialogName(d));
    option.value = d;
    option.title = d;
    options.push(option);
  }
  select.replaceChildren(...options);
  select.value = seen.includes(chosen) ? chosen : "";
}

function refilter(keepId) {
  nameDialogs();
  listDialogs();
  const needle = $("filter").value.trim().toLowerCase();
  const dialog = $("dialog").value;
  // A restore's undo point is shown with the restore (one row for one restore).
  const undoPoints = new Set(state.all.filter((c) => c.restore).map((c) => c.restore.undo));
  // A turn's steps and end are shown with its prompt, not as rows of their own.
  state.steps = new Map();
  for (const c of state.all) {
    if (c.kind !== "step" && c.kind !== "turn-end") continue;
    const turn = typeof c.turn === "string" ? c.turn : null;
    if (!turn) continue;
    if (!state.steps.has(turn)) state.steps.set(turn, []);
    state.steps.get(turn).unshift(c);
  }
  state.shown = state.all.filter((c) => !undoPoints.has(c.id) && c.kind !== "step" && c.kind !== "turn-end"
    && (!dialog || c.dialog === dialog)
    && (!needle || `${c.label}\n${c.id}\n${(c.tags || []).join(" ")}`.toLowerCase().includes(needle)));
  if (keepId) state.cursor = state.shown.findIndex((c) => c.id === keepId);
  if (state.cursor >= state.shown.length) state.cursor = state.shown.length - 1;
  const entries = state.all.filter((c) => c.kind !== "step" && c.kind !== "turn-end").length;
  $("count").textContent = `${state.shown.length} of ${entries} checkpoints`;
  $("rows").style.height = `${state.shown.length * ROW}px`;
  renderRows();
}

function renderRows() {
  const list = $("timeline");
  const from = Math.max(0, Math.floor(list.scrollTop / ROW) - 10);
  const to = Math.min(state.shown.length, Math.ceil((list.scrollTop + list.clientHeight) / ROW) + 10);
  const rows = [];
  for (let i = from; i < to; i++) rows.push(entry(state.shown[i], i));
  $("rows").replaceChildren(...rows);
}

function entry(c, i) {
  const row = el("div", `entry kind-${c.kind}`);
  row.style.top = `${i * ROW}px`;
  row.setAttribute("role", "option");
  row.dataset.checkpoint = c.id;
  row.setAttribute("aria-selected", String(i === state.cursor));
  if (state.base && state.base.id === c.id) row.classList.add("base");
  row.append(el("div", "title", title(c)));
  const meta = el("div", "meta");
  meta.append(
    el("span", "seq", `#${c.seq}`),
    el("span", "badge", c.kind.replace("_", " ")),
    el("span", "", ago(c.created_at)),
    el("span", "dialog", dialogName(c.dialog)),
    el("span", "agent", state.agents.get(c.dialog) || ""),
    // What the entry did: a prompt's turn, as `ckpt log` counts it; else its own changes.
    el("span", "add", `+${turnOf(c).added}`),
    el("span", "mod", `~${turnOf(c).modified}`),
    el("span", "del", `−${turnOf(c).deleted}${turnOf(c) !== c && !c.turn.until ? " so far" : ""}`),
  );
  row.append(meta);
  row.addEventListener("click", () => { moveTo(i); openEntry(c); });
  return row;
}

function moveTo(i) {
  if (i < 0 || i >= state.shown.length) return;
  state.cursor = i;
  const list = $("timeline");
  const top = i * ROW;
  if (top < list.scrollTop) list.scrollTop = top;
  else if (top + ROW > list.scrollTop + list.clientHeight) list.scrollTop = top + ROW - list.clientHeight;
  renderRows();
}

// --- one entry --------------------------------------------------------------------------

// The entry after `c` in its dialog (newer), whose checkpoint ends the turn `c` started.
function nextInDialog(c) {
  const i = state.all.findIndex((x) => x.id === c.id);
  for (let j = i - 1; j >= 0; j--) if (state.all[j].dialog === c.dialog) return state.all[j];
  return null;
}

async function openEntry(c) {
  state.open = c;
  const detail = $("detail");
  const head = el("div", "head");
  head.append(el("h2", "", title(c)));
  const facts = el("dl", "facts");
  const fact = (name, value) => { facts.append(el("dt", "", name), el("dd", "", value)); };
  fact("checkpoint", c.id);
  fact("when", `${new Date(c.created_at).toLocaleString()} (${ago(c.created_at)})`);
  fact("kind", `${c.kind.replace("_", " ")} · #${c.seq} · session ${c.session}`);
  fact("dialog", `${dialogName(c.dialog)}${dialogName(c.dialog) === c.dialog ? "" : ` (${c.dialog})`}`);
  fact("changes", `${counts(c)} · ${c.files} files`);
  if (c.tags && c.tags.length) fact("tags", c.tags.join(", "));
  if (c.notes) fact("notes", c.notes);
  if (c.restore) fact("restored to", `${c.restore.restored_to} (undo point ${c.restore.undo})`);
  const agent = el("dd", "", state.agents.get(c.dialog) || "…");
  facts.append(el("dt", "", "agent"), agent);
  head.append(facts);

  const actions = el("div", "actions");
  actions.append(
    button("Restore files to this checkpoint…", "restore", () => planRestore(c), "primary"),
  );
  if (c.kind === "message") actions.append(button("Revert this turn…", "revert", () => planRevert(c, c), "primary"));
  actions.append(button(state.base ? "Stop comparing" : "Compare with another…", "compare", () => toggleCompare(c)));
  const steps = c.kind === "message" ? stepList(c) : null;
  const tabs = el("div", "tabs");
  const view = state.view || (c.kind === "message" ? "turn" : "own");
  const tab = (name, label) => {
    const b = button(label, `view-${name}`, () => { state.view = name; openEntry(c); });
    b.setAttribute("aria-pressed", String(view === name));
    return b;
  };
  if (!state.base || state.base.id === c.id) {
    const turnTab = tab("turn", c.kind === "message" ? "What its turn changed" : "What came after it");
    const ownTab = tab("own", "Changes since the previous checkpoint");
    if (c.kind === "message") tabs.append(turnTab, ownTab); else tabs.append(ownTab, turnTab);
  }
  const plan = el("div", "plan-area");
  const diff = el("div", "diff");
  diff.dataset.testid = "diff";
  diff.append(el("p", "muted", "Loading…"));
  detail.replaceChildren(...[head, actions, plan, steps, tabs, diff].filter(Boolean));

  const shownLater = get("show", { project: state.project, id: c.id });
  shownLater.then((shown) => {
    const meta = shown.meta || {};
    agent.textContent = meta.ckpt_agent || state.agents.get(c.dialog) || "—";
  }).catch(() => { agent.textContent = "—"; });

  try {
    let from, to, caption;
    if (state.base && state.base.id !== c.id) {
      [from, to] = Date.parse(state.base.created_at) <= Date.parse(c.created_at) ? [state.base, c] : [c, state.base];
      caption = `Compared: #${from.seq} “${title(from)}” → #${to.seq} “${title(to)}”`;
      from = from.id; to = to.id;
    } else if (view === "turn") {
      // A prompt's turn runs to the next prompt of its dialog (as `ckpt log` counts it).
      const until = turnOf(c) !== c ? state.all.find((x) => x.id === c.turn.until) || null : nextInDialog(c);
      from = c.id;
      to = until ? until.id : null;
      caption = until
        ? `What ${c.kind === "message" ? "its turn" : "came after it"} changed, up to #${until.seq}`
        : `What ${c.kind === "message" ? "its turn" : "came after it"} changed so far (to the files now)`;
    } else {
      if (!c.parent) {
        const shown = await shownLater;
        if (state.open !== c) return;
        renderDiff(diff, "The first checkpoint: every file added", { files: shown.changes, patch: "", files_total: shown.changes_total });
        return;
      }
      from = c.parent; to = c.id;
      caption = "Changes since the previous checkpoint";
    }
    // A prompt's turn: only the files its own turn changed (as `ckpt log` counts it).
    const turn = !state.base && view === "turn" && c.kind === "message";
    // The file list first (the first screen, however big the change), then the text by pages.
    const result = await get("diff", { project: state.project, from, to, turn });
    if (state.open !== c) return;
    renderDiff(diff, caption, result);
    loadPatch(diff, c, { from, to, turn });
  } catch (e) {
    if (state.open === c) diff.replaceChildren(el("p", "error", e.message));
  }
}

// A turn's steps, oldest first: each tool call that changed files (or a point: an answered
// question, an approved plan) and the turn's end, to restore to or revert from.
function stepList(c) {
  const steps = (state.steps && state.steps.get(c.id)) || [];
  if (!steps.length) return null;
  const box = el("div", "steps");
  box.dataset.testid = "steps";
  box.append(el("h3", "", `Its steps (${steps.filter((s) => s.kind === "step").length})`));
  const ol = el("ol", "");
  for (const s of steps) {
    const li = el("li", `step kind-${s.kind}`);
    li.dataset.checkpoint = s.id;
    const what = s.kind === "turn-end" ? "the turn ended" : `${s.tool || "a tool"}${(s.touched || []).length ? ` — ${(s.touched || []).map(shownPath).join(", ")}` : ""}`;
    li.append(el("span", "what", `${s.step ? `${s.step}. ` : ""}${what}`), el("span", "muted", ` ${ago(s.created_at)} · ${counts(s)}`));
    if (s.kind === "step") {
      li.append(
        button("Restore to here…", "restore-step", () => planRestore(s)),
        button("Revert after this…", "revert-step", () => planRevert(s, c)),
      );
    }
    ol.append(li);
  }
  box.append(ol);
  return box;
}

function toggleCompare(c) {
  state.base = state.base ? null : c;
  if (state.base) toast("Now select the entry to compare with.");
  renderRows();
  openEntry(c);
}

// --- diffs ------------------------------------------------------------------------------

const STATUS = { added: "A", modified: "M", deleted: "D", renamed: "R", type_changed: "T", mode_changed: "M" };

function renderDiff(target, caption, result) {
  const files = result.files || [];
  const total = result.files_total || files.length;
  const parts = [el("h3", "", `${caption} — ${total} file${total === 1 ? "" : "s"}`)];
  if (!files.length) parts.push(el("p", "muted", "No file differs."));
  const list = el("ul", "files");
  for (const f of files) {
    const li = el("li", `file status-${f.status}`);
    li.append(el("span", "status", STATUS[f.status] || "?"), el("span", "path", shownPath(f.path)));
    li.append(el("span", "add", f.binary ? "binary" : `+${f.lines_added}`));
    if (!f.binary) li.append(el("span", "del", `−${f.lines_removed}`));
    li.addEventListener("click", () => {
      const section = target.querySelector(`[data-path="${CSS.escape(f.path)}"]`);
      if (section) section.scrollIntoView({ block: "start" });
    });
    list.append(li);
  }
  parts.push(list);
  if (result.files_total && result.files_total > files.length) {
    parts.push(el("p", "muted", `… and ${result.files_total - files.length} more files (use \`ckpt diff\`)`));
  }
  const sections = el("div", "sections");
  for (const section of splitPatch(result.patch || "")) sections.append(renderFile(section));
  parts.push(sections);
  target.replaceChildren(...parts);
}

// The diff's text, a page at a time (the daemon makes each page alone), appended under the
// file list; past the first pages, a button asks for more.
async function loadPatch(target, c, range, offset = 0, text = "") {
  const sections = target.querySelector(".sections");
  if (!sections) return;
  let page;
  try {
    page = await get("diff", { project: state.project, from: range.from, to: range.to, turn: range.turn, offset });
  } catch (e) {
    if (state.open === c) sections.append(el("p", "error", e.message));
    return;
  }
  if (state.open !== c) return;
  text += page.patch || "";
  sections.replaceChildren(...splitPatch(text).map(renderFile));
  if (page.next_offset) {
    if (text.length < (2 << 20)) {
      loadPatch(target, c, range, page.next_offset, text);
    } else {
      sections.append(button("Show more of the diff", "more", () => loadPatch(target, c, range, page.next_offset, text)));
    }
  }
}

// One entry per file of a unified diff: its path and its lines.
function splitPatch(patch) {
  const sections = [];
  let current = null;
  for (const line of patch.split("\n")) {
    if (line.startsWith("diff --git ")) {
      current = { header: [line], lines: [], path: null };
      sections.push(current);
    } else if (!current) {
      continue;
    } else if (!current.lines.length && !line.startsWith("@@")) {
      current.header.push(line);
      const m = /^\+\+\+ b\/(.*)$/.exec(line) || /^--- a\/(.*)$/.exec(line);
      if (m && !current.path) current.path = m[1];
    } else {
      current.lines.push(line);
    }
  }
  for (const s of sections) {
    if (!s.path) s.path = s.header[0].replace(/^diff --git a\/(.*) b\/.*$/, "$1");
  }
  return sections;
}

const MAX_LINES = 4000;

function renderFile(section) {
  const box = el("section", "file-diff");
  box.dataset.path = section.path;
  box.append(el("h4", "", section.path));
  for (const h of section.header.slice(1)) {
    if (!h.startsWith("---") && !h.startsWith("+++") && !h.startsWith("index ")) box.append(el("div", "note", h));
  }
  const pre = el("pre", "lines");
  const lines = section.lines.length > MAX_LINES ? section.lines.slice(0, MAX_LINES) : section.lines;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    // A removed line followed by an added one: highlight the words that differ.
    if (line.startsWith("-") && i + 1 < lines.length && lines[i + 1].startsWith("+")
        && !(i + 2 < lines.length && lines[i + 2].startsWith("+"))
        && !(i > 0 && lines[i - 1].startsWith("-"))) {
      pre.append(...wordPair(line.slice(1), lines[i + 1].slice(1)));
      i++;
      continue;
    }
    const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("\\") ? "note" : "ctx";
    pre.append(el("div", `line ${cls}`, line));
  }
  if (section.lines.length > MAX_LINES) pre.append(el("div", "line note", `… ${section.lines.length - MAX_LINES} more lines (use \`ckpt diff\`)`));
  box.append(pre);
  return box;
}

// The two lines of a one-line change, their common start and end plain and the middle marked.
function wordPair(old, now) {
  let start = 0;
  while (start < old.length && start < now.length && old[start] === now[start]) start++;
  let end = 0;
  while (end < old.length - start && end < now.length - start
         && old[old.length - 1 - end] === now[now.length - 1 - end]) end++;
  const make = (sign, cls, text) => {
    const div = el("div", `line ${cls}`);
    div.append(
      document.createTextNode(sign + text.slice(0, start)),
      el("mark", "", text.slice(start, text.length - end)),
      document.createTextNode(text.slice(text.length - end)),
    );
    return div;
  };
  return [make("-", "del", old), make("+", "add", now)];
}

// --- restore and undo -------------------------------------------------------------------

// A group of paths, each marked: `+` a file made, `~` one replaced, `−` one deleted, `!` one
// left alone (`created` names the made ones).
function pathList(title, cls, paths, created) {
  const box = el("div", `plan-group ${cls}`);
  box.append(el("h4", "", `${title} (${paths.length})`));
  const ul = el("ul", "");
  for (const p of paths.slice(0, 500)) {
    const li = el("li", created && created.has(p) ? "new" : "", shownPath(p));
    ul.append(li);
  }
  if (paths.length > 500) ul.append(el("li", "muted", `… and ${paths.length - 500} more`));
  box.append(ul);
  return box;
}

// What a restore did, or with `planned` what it would do (nothing is written before that).
function outcome(result, planned) {
  const skipped = (result.skipped || []).map((s) => `${shownPath(s.path)}: ${s.reason}${s.detail ? ` (${s.detail})` : ""}`);
  const created = new Set(result.created || []);
  const words = planned ? ["to write", "to delete", "to leave alone"] : ["written", "deleted", "left alone"];
  return [
    pathList(words[0], "write", result.written || [], created),
    pathList(words[1], "delete", result.deleted || []),
    pathList(words[2], "skip", skipped),
  ];
}

async function planRestore(c) {
  const area = document.querySelector(".plan-area");
  area.replaceChildren(el("p", "muted", "Planning…"));
  let plan, rewind = null;
  try {
    plan = await post("restore", { project: state.project, id: c.id, dry_run: true });
    // A prompt's conversation can be rewound with the files where its agent's session is readable.
    if (c.kind === "message") {
      rewind = await post("rewind", { project: state.project, id: c.id, dry_run: true }).catch((e) => ({ conversation: null, conversation_skipped: e.message }));
    }
  } catch (e) {
    area.replaceChildren(el("p", "error", e.message));
    return;
  }
  const box = el("div", "plan");
  box.dataset.testid = "plan";
  const n = (plan.written || []).length + (plan.deleted || []).length;
  box.append(el("h3", "", n
    ? `Restoring #${c.seq} “${title(c)}” will write ${plan.written.length}, delete ${plan.deleted.length} and skip ${plan.skipped.length} file(s). Nothing has changed yet.`
    : `The files already are as #${c.seq} holds them. Nothing to restore.`));
  box.append(...outcome(plan, true));
  const buttons = el("div", "actions");
  buttons.append(button("Restore these files", "confirm", () => confirmRestore(c, area), "primary danger"));
  if (rewind && rewind.files === "reverted") {
    box.append(el("p", "conversation", `Others changed files since this prompt: rewind takes back only this session's turns since it (${(rewind.reverted || []).length} file(s)) and keeps the rest (${(rewind.left_alone || []).length} file(s) others changed).`));
  }
  if (rewind && rewind.conversation) {
    box.append(el("p", "conversation", `Rewind also forks the ${rewind.conversation.agent} conversation to just before this prompt: a new session (the original stays as it is).`));
    buttons.append(button("Rewind files and conversation", "rewind", () => confirmRewind(c, area), "primary"));
  } else if (rewind && rewind.conversation_skipped) {
    box.append(el("p", "muted", `The conversation cannot be rewound with the files: ${rewind.conversation_skipped}`));
  }
  buttons.append(button("Cancel", "cancel", () => area.replaceChildren()));
  box.append(buttons);
  area.replaceChildren(box);
}

// What a revert took back, or with `planned` would take back, and what it left and why.
function reverted(result, planned) {
  const left = (result.refused || []).map((r) => `${shownPath(r.path)}: ${r.reason}`);
  const kept = (result.left_alone || []).map((r) => `${shownPath(r.path)}: ${r.reason}`);
  const skipped = (result.skipped || []).map((s) => `${shownPath(s.path)}: ${s.reason}`);
  const parts = [
    pathList(planned ? "to take back" : "taken back", "write", result.reverted || []),
    pathList(planned ? "to leave as it is" : "left as it is", "skip", left.concat(skipped)),
  ];
  if (kept.length) parts.push(pathList("kept: others' work", "skip", kept));
  return parts;
}

// Revert `c` (a prompt: its turn; a step: what its turn did after it), whose turn is `turn`.
async function planRevert(c, turn) {
  const area = document.querySelector(".plan-area");
  area.replaceChildren(el("p", "muted", "Planning…"));
  let plan;
  try {
    plan = await post("revert", { project: state.project, id: c.id, dry_run: true });
  } catch (e) {
    area.replaceChildren(el("p", "error", e.message));
    return;
  }
  const box = el("div", "plan");
  box.dataset.testid = "plan";
  const what = c.kind === "step" ? `what the turn of “${title(turn)}” did after step ${c.step}` : `the turn of “${title(c)}”`;
  box.append(el("h3", "", plan.reverted.length
    ? `Reverting ${what} will take back ${plan.reverted.length} file(s) and leave ${plan.refused.length} as they are; every other session's files and your edits stay. Nothing has changed yet.`
    : `The files hold none of ${what}'s changes. Nothing to take back.`));
  box.append(...reverted(plan, true));
  const buttons = el("div", "actions");
  if (plan.reverted.length) buttons.append(button("Take back these changes", "confirm", () => confirmRevert(c, area), "primary danger"));
  buttons.append(button("Cancel", "cancel", () => area.replaceChildren()));
  box.append(buttons);
  area.replaceChildren(box);
}

async function confirmRevert(c, area) {
  area.replaceChildren(el("p", "muted", "Reverting…"));
  let result;
  try {
    result = await post("revert", { project: state.project, id: c.id });
  } catch (e) {
    area.replaceChildren(el("p", "error", e.message));
    return;
  }
  const box = el("div", "plan done");
  box.dataset.testid = "reverted";
  box.append(el("h3", "", `Took back ${result.reverted.length} file(s); left ${result.refused.length} as they are.`));
  box.append(...reverted(result), undoButton(area));
  area.replaceChildren(box);
  refreshNewest(state.project);
}

function undoButton(area) {
  const actions = el("div", "actions");
  actions.append(button("Undo this restore", "undo", () => undoRestore(area), "primary"));
  return actions;
}

async function confirmRestore(c, area) {
  area.replaceChildren(el("p", "muted", "Restoring…"));
  let result;
  try {
    result = await post("restore", { project: state.project, id: c.id });
  } catch (e) {
    area.replaceChildren(el("p", "error", e.message));
    return;
  }
  const box = el("div", "plan done");
  box.dataset.testid = "restored";
  box.append(el("h3", "", `Restored to #${c.seq}: ${result.written.length} written, ${result.deleted.length} deleted, ${result.skipped.length} skipped.`));
  box.append(...outcome(result), undoButton(area));
  area.replaceChildren(box);
  refreshNewest(state.project);
}

async function confirmRewind(c, area) {
  area.replaceChildren(el("p", "muted", "Rewinding…"));
  let result;
  try {
    result = await post("rewind", { project: state.project, id: c.id });
  } catch (e) {
    area.replaceChildren(el("p", "error", e.message));
    return;
  }
  const box = el("div", "plan done");
  box.dataset.testid = "restored";
  box.append(el("h3", "", result.files === "reverted"
    ? `Rewound this session to just before “${title(c)}”: its turns' changes taken back in ${result.reverted.length} file(s); what other sessions and you changed is kept.`
    : `Rewound to just before “${title(c)}”: ${result.written.length} written, ${result.deleted.length} deleted, ${result.skipped.length} skipped.`));
  const fork = result.conversation;
  if (fork) {
    const said = fork.session_id
      ? `The ${fork.agent} conversation is forked: continue it with`
      : `No conversation came before that prompt: start a new one with`;
    box.append(el("p", "", said));
    const resume = el("pre", "resume", fork.resume.join(" "));
    resume.dataset.testid = "resume";
    box.append(resume, el("p", "muted", "The prompt, to edit and send again:"), el("pre", "resume", fork.prompt));
  } else if (result.conversation_skipped) {
    box.append(el("p", "muted", `Only the files were rewound: ${result.conversation_skipped}`));
  }
  box.append(...(result.files === "reverted" ? reverted(result) : outcome(result)), undoButton(area));
  area.replaceChildren(box);
  refreshNewest(state.project);
}

async function undoRestore(area) {
  area.replaceChildren(el("p", "muted", "Undoing…"));
  try {
    const result = await post("undo", { project: state.project });
    const box = el("div", "plan done");
    box.dataset.testid = "undone";
    box.append(el("h3", "", `Undone: ${result.written.length} written, ${result.deleted.length} deleted, ${result.skipped.length} skipped.`));
    box.append(...outcome(result));
    area.replaceChildren(box);
    refreshNewest(state.project);
  } catch (e) {
    area.replaceChildren(el("p", "error", e.message));
  }
}

// --- keys and start ---------------------------------------------------------------------

$("timeline").addEventListener("scroll", renderRows);
window.addEventListener("resize", renderRows);
$("dialog").addEventListener("change", () => {
  const keep = state.shown[state.cursor] && state.shown[state.cursor].id;
  refilter(keep);
});
$("filter").addEventListener("input", () => {
  const keep = state.shown[state.cursor] && state.shown[state.cursor].id;
  refilter(keep);
});
$("timeline").addEventListener("keydown", (e) => {
  if (e.key === "ArrowDown") { moveTo(Math.max(0, state.cursor + 1)); e.preventDefault(); }
  else if (e.key === "ArrowUp") { moveTo(Math.max(0, state.cursor - 1)); e.preventDefault(); }
  else if (e.key === "Enter" && state.shown[state.cursor]) { openEntry(state.shown[state.cursor]); e.preventDefault(); }
});

if (!TOKEN) {
  $("detail").replaceChildren(el("p", "error", "Open the URL `ckpt ui` printed: it carries the page's token."));
} else {
  loadProjects().catch((e) => toast(e.message));
}
