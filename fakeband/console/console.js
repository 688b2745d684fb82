// fakeband console: reads the admin API and its live feed, and drives the
// fake as a person would. Plain JavaScript; every text from the fake goes
// into the page as text (textContent), never as HTML.
"use strict";

const admin = "/_admin";
const state = {
  setup: null, // /_admin/setup
  rooms: [], // /_admin/rooms
  roomId: null, // the open room
  timeline: null, // /_admin/timeline of the open room
  faults: null, // /_admin/faults
  seen: new Map(), // room id -> items seen
  open: new Set(), // life panels the user opened: message id + agent id
};

const $ = (id) => document.getElementById(id);

// fill replaces node's children with the ones given, leaving out nulls.
function fill(node, ...children) {
  node.replaceChildren(...children.filter((c) => c !== null && c !== undefined));
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

// call sends one admin request: JSON in, {"data"} out; a refusal throws
// with the fake's message.
async function call(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(admin + path, init);
  let parsed = null;
  try {
    parsed = await resp.json();
  } catch {
    throw new Error(`${method} ${path}: answered ${resp.status} without JSON`);
  }
  if (!resp.ok) {
    const e = parsed && parsed.error;
    throw new Error(e ? `${e.code}: ${e.message}` : `${method} ${path}: ${resp.status}`);
  }
  return parsed.data;
}

function notify(message) {
  const n = $("notice");
  n.textContent = message;
  n.hidden = !message;
}

// act runs a user's action, reporting a refusal instead of throwing.
async function act(what, fn) {
  try {
    await fn();
    notify("");
  } catch (err) {
    notify(`${what}: ${err.message}`);
  }
}

function people() {
  const s = state.setup;
  return s ? [s.owner, ...s.humans, ...s.agents] : [];
}

function nameOf(id) {
  const p = people().find((x) => x.id === id);
  return p ? p.name : id;
}

function currentRoom() {
  return state.rooms.find((r) => r.id === state.roomId) || null;
}

// ---- loading, coalesced: at most one request of each kind in flight ----

function coalesced(load) {
  let running = null;
  let again = false;
  const run = async () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        try {
          await load();
        } catch (err) {
          notify(err.message);
        }
      } while (again);
    })();
    try {
      await running;
    } finally {
      running = null;
    }
  };
  return run;
}

const loadSetup = coalesced(async () => {
  state.setup = await call("GET", "/setup");
  renderCreateRoom();
});

const loadRooms = coalesced(async () => {
  state.rooms = await call("GET", "/rooms");
  if (!state.roomId || !currentRoom()) {
    const fromHash = decodeURIComponent(location.hash.slice(1));
    const pick = state.rooms.find((r) => r.id === fromHash || r.title === fromHash) || state.rooms[0];
    state.roomId = pick ? pick.id : null;
  }
  renderRooms();
  renderRoomSide();
});

const loadTimeline = coalesced(async () => {
  if (!state.roomId) {
    state.timeline = null;
  } else {
    const id = state.roomId;
    const t = await call("GET", `/timeline?room=${encodeURIComponent(id)}`);
    if (id !== state.roomId) return; // the user moved on meanwhile
    state.timeline = t;
    state.seen.set(id, t.items.length + t.earlier);
  }
  renderTimeline();
  renderRooms();
  renderRoomSide();
});

const loadFaults = coalesced(async () => {
  state.faults = await call("GET", "/faults");
  renderFaults();
});

async function loadAll() {
  await loadSetup();
  await loadRooms();
  await Promise.all([loadTimeline(), loadFaults()]);
}

// ---- the live feed ----

function connectFeed() {
  const live = $("live");
  const source = new EventSource(admin + "/feed");
  source.addEventListener("hello", () => {
    live.dataset.state = "live";
    live.textContent = "live";
    loadAll(); // whatever happened while disconnected
  });
  source.addEventListener("reset", () => {
    // The fake dropped this stream because it fell behind: read it all again.
    live.dataset.state = "connecting";
    live.textContent = "catching up…";
  });
  source.onerror = () => {
    live.dataset.state = "down";
    live.textContent = "reconnecting…";
  };
  source.onmessage = (msg) => {
    let e;
    try {
      e = JSON.parse(msg.data);
    } catch {
      return;
    }
    onChange(e);
  };
}

const roomKinds = new Set(["room", "join", "leave", "post", "chat_event", "stop", "play", "rename"]);
const castKinds = new Set(["room", "join", "leave", "rename"]);

function onChange(e) {
  if (e.kind === "faults" || (e.kind === "request" && e.request && e.request.fault)) loadFaults();
  if (castKinds.has(e.kind)) loadSetup();
  if (roomKinds.has(e.kind)) loadRooms();
  if (e.room_id && e.room_id === state.roomId) loadTimeline();
}

// ---- rendering ----

// keepingFocus runs render and, if it replaced the element that had the
// focus, gives the focus to its replacement (same data-focus-key): a
// keyboard user's place survives the live updates.
function keepingFocus(render) {
  return (...args) => {
    const active = document.activeElement;
    const key = active && active.dataset ? active.dataset.focusKey : undefined;
    render(...args);
    if (key && !document.body.contains(active)) {
      const again = document.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
      if (again) again.focus();
    }
  };
}

const renderRooms = keepingFocus(function renderRooms() {
  const list = $("rooms");
  list.replaceChildren(
    ...state.rooms.map((r) => {
      const seen = state.seen.get(r.id) || 0;
      const unread = r.id === state.roomId ? 0 : Math.max(0, r.items - seen);
      const label = `${r.title}${unread ? `, ${unread} unread` : ""}${r.stopped.length ? ", stopped" : ""}`;
      return el(
        "li",
        {},
        el(
          "button",
          {
            type: "button",
            "aria-current": r.id === state.roomId ? "true" : "false",
            "aria-label": label,
            "data-room": r.title,
            "data-focus-key": "room:" + r.id,
            onclick: () => openRoom(r.id),
          },
          el("span", { text: r.title }),
          r.stopped.length ? el("span", { class: "stopped-tag", text: "stopped" }) : null,
          el("span", { class: "unread", "data-count": unread, text: String(unread) }),
        ),
      );
    }),
  );
});

function openRoom(id) {
  if (id === state.roomId) return;
  state.roomId = id;
  state.timeline = null;
  const r = currentRoom();
  if (r) history.replaceState(null, "", "#" + encodeURIComponent(r.title));
  renderRooms();
  renderRoomSide();
  renderTimeline();
  loadTimeline();
}

function execOf(agentId) {
  const t = state.timeline;
  return t ? t.executions.find((e) => e.agent_id === agentId) : null;
}

// renderRoomSide draws what depends on the room's members: the heading,
// the composer's sender and mentions, the agents and participants.
const renderRoomSide = keepingFocus(function renderRoomSide() {
  const r = currentRoom();
  $("room-heading").textContent = r ? r.title : "No room";
  const members = r ? r.members : [];
  const agents = members.filter((m) => m.type === "Agent");
  const humans = members.filter((m) => m.type !== "Agent");
  const stopped = r ? r.stopped : [];
  $("room-state").textContent = r
    ? `${members.length} participant${members.length === 1 ? "" : "s"}` +
      (stopped.length ? ` · stopped: ${stopped.map(nameOf).join(", ")}` : "")
    : "";

  // Composer: speak as a human of the room; mention anyone else in it.
  const from = $("say-from");
  const keep = from.value;
  from.replaceChildren(...humans.map((h) => el("option", { value: h.id, text: h.name })));
  if (humans.some((h) => h.id === keep)) from.value = keep;
  else if (r && humans.some((h) => h.id === r.owner_id)) from.value = r.owner_id;
  renderMentions();
  for (const id of ["say-text", "say-button"]) $(id).disabled = !r || humans.length === 0;

  // Agents here, with their controls.
  $("agents").replaceChildren(
    ...agents.map((a) => {
      const ex = execOf(a.id);
      const flags = [stopped.includes(a.id) ? "stopped" : "playing"];
      if (ex && ex.working) flags.push("working");
      const b = (text, label, fn, cls) =>
        el(
          "button",
          { type: "button", class: cls, "aria-label": `${label} ${a.name}`, "data-focus-key": `agent:${a.id}:${text}`, onclick: () => act(`${label} ${a.name}`, fn) },
          text,
        );
      return el(
        "li",
        { "data-agent": a.name },
        el("strong", { text: a.name }),
        el("span", { class: "agent-state", text: ` ${flags.join(", ")}` }),
        el(
          "div",
          { class: "buttons" },
          b("Interrupt here", "Interrupt in this room", () => call("POST", "/interrupt", { agent: a.id, room: r.id })),
          b("Interrupt everywhere", "Interrupt everywhere", () => call("POST", "/interrupt", { agent: a.id })),
          b("Stop", "Stop", () => call("POST", "/stop", { room: r.id, agent: a.id }), "secondary"),
          b("Play", "Play", () => call("POST", "/play", { room: r.id, agent: a.id }), "secondary"),
          b("Supersede", "Supersede", () => call("POST", "/supersede", { agent: a.id }), "danger"),
          b("Drop socket", "Drop the socket of", () => call("POST", "/drop", { agent: a.id }), "danger"),
        ),
      );
    }),
  );

  // Participants, and whom to add.
  $("members").replaceChildren(
    ...members.map((m) =>
      el(
        "li",
        {},
        el("span", { text: `${m.name} (${m.type === "Agent" ? "agent" : "human"}, ${m.role})` }),
        el(
          "button",
          {
            type: "button",
            class: "danger",
            "aria-label": `Remove ${m.name} from the room`,
            "data-focus-key": "remove:" + m.id,
            onclick: () => act(`Remove ${m.name}`, () => call("DELETE", "/participants", { room: r.id, participant: m.id })),
          },
          "Remove",
        ),
      ),
    ),
  );
  const outside = people().filter((p) => !members.some((m) => m.id === p.id));
  $("add-who").replaceChildren(...outside.map((p) => el("option", { value: p.id, text: `${p.name} (${p.type === "Agent" ? "agent" : "human"})` })));
  $("add-member").querySelector("button").disabled = !r || outside.length === 0;
  for (const id of ["room-stop", "room-play", "room-interrupt"]) $(id).disabled = !r || agents.length === 0;
});

const renderMentions = keepingFocus(function renderMentions() {
  const r = currentRoom();
  const box = $("say-mentions");
  const before = new Map([...box.querySelectorAll("input")].map((i) => [i.value, i.checked]));
  const from = $("say-from").value;
  const others = r ? r.members.filter((m) => m.id !== from) : [];
  box.replaceChildren(
    el("legend", { text: "Mention" }),
    ...others.map((m) => {
      const id = `mention-${m.id}`;
      const checked = before.has(m.id) ? before.get(m.id) : m.type === "Agent";
      return el("label", { for: id }, el("input", { type: "checkbox", id, value: m.id, checked }), ` ${m.name}`);
    }),
  );
});

function renderCreateRoom() {
  const s = state.setup;
  const humans = [s.owner, ...s.humans];
  const owner = $("room-owner");
  const keep = owner.value;
  owner.replaceChildren(...humans.map((h) => el("option", { value: h.id, text: h.name })));
  if (humans.some((h) => h.id === keep)) owner.value = keep;
  const box = $("room-members");
  const before = new Map([...box.querySelectorAll("input")].map((i) => [i.value, i.checked]));
  box.replaceChildren(
    el("legend", { text: "Members" }),
    ...people()
      .filter((p) => p.id !== s.owner.id)
      .map((p) => {
        const id = `member-${p.id}`;
        const checked = before.has(p.id) ? before.get(p.id) : p.type === "Agent";
        return el("label", { for: id }, el("input", { type: "checkbox", id, value: p.id, checked }), ` ${p.name}`);
      }),
  );
}

function describeMark(m) {
  return `#${m.seq} ${m.kind} (attempt ${m.attempt})${m.error ? `: ${m.error}` : ""}`;
}

function describeRequest(q) {
  const what = `${q.method} ${q.endpoint}`;
  switch (q.outcome) {
    case "lost":
      return `${what}: applied (${q.status}), answer lost by a ${q.fault} fault`;
    case "abandoned":
      return `${what}: the agent gave up while it was held; not applied`;
    case "closed":
      return `${what}: the fake closed first`;
  }
  return `${what} → ${q.status}${q.fault ? ` (${q.fault} fault)` : ""}`;
}

function renderLife(item, life) {
  const key = item.id + "/" + life.agent_id;
  const summary = el(
    "summary",
    { "data-focus-key": "life:" + key },
    `${life.agent_name}: `,
    el("span", { class: "status", "data-status": life.status, text: life.status }),
    ` · ${life.attempts} attempt${life.attempts === 1 ? "" : "s"}`,
    life.held ? el("span", { class: "held", text: ` · held: ${life.agent_name} is stopped here` }) : null,
    life.status === "failed" && life.reason ? ` · dead letter: ${life.reason}` : null,
    ` · ${life.requests_total} request${life.requests_total === 1 ? "" : "s"}`,
  );
  const d = el(
    "details",
    { "data-agent": life.agent_name, "data-status": life.status, "data-held": life.held ? "true" : "false", "data-attempts": life.attempts },
    summary,
  );
  if (state.open.has(key)) d.open = true;
  d.addEventListener("toggle", () => (d.open ? state.open.add(key) : state.open.delete(key)));
  d.append(
    el("p", { text: "delivered" + life.marks.map((m) => " → " + m.kind).join("") + (life.open ? " (attempt open)" : "") }),
    el("p", { text: "Marks:" }),
    el("ol", {}, ...(life.marks.length ? life.marks.map((m) => el("li", { text: describeMark(m) })) : [el("li", { text: "none yet" })])),
    el("p", { text: `Requests for it (${life.requests_total}${life.requests_total > life.requests.length ? `, the last ${life.requests.length} shown` : ""}):` }),
    el(
      "ol",
      {},
      ...(life.requests.length
        ? life.requests.map((q) => el("li", { class: q.outcome === "lost" ? "req-lost" : null, "data-endpoint": q.endpoint, "data-outcome": q.outcome, text: describeRequest(q) }))
        : [el("li", { text: "none yet" })]),
    ),
  );
  return d;
}

const renderTimeline = keepingFocus(function renderTimeline() {
  const list = $("timeline");
  const t = state.timeline;
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  const earlier = $("earlier");
  earlier.hidden = !t || t.earlier === 0;
  earlier.textContent = t && t.earlier ? `${t.earlier} earlier item(s) not shown` : "";
  if (!t) {
    list.replaceChildren();
    return;
  }
  const byId = new Map(t.items.map((i) => [i.id, i]));
  const tpl = $("item-template").content;
  list.replaceChildren(
    ...t.items.map((it) => {
      const node = tpl.firstElementChild.cloneNode(true);
      node.dataset.id = it.id;
      node.dataset.type = it.type;
      node.dataset.senderType = it.sender_type;
      node.dataset.copies = it.copies || 1;
      node.dataset.postedTwice = it.posted_twice ? "true" : "false";
      node.dataset.replies = it.replies.length;
      if (it.type !== "text") node.classList.add("event");
      node.querySelector(".sender").textContent = it.sender_name;
      node.querySelector(".kind").textContent = it.type === "text" ? (it.sender_type === "Agent" ? "reply" : "message") : it.type;
      node.querySelector(".seq").textContent = `#${it.seq}`;
      node.querySelector(".text").textContent = it.text;
      if (it.reply_to) {
        const to = byId.get(it.reply_to);
        const rt = node.querySelector(".reply-to");
        rt.hidden = false;
        rt.textContent = `↳ for ${to ? `${to.sender_name}: “${to.text.slice(0, 60)}”` : "an earlier message"}`;
      }
      const badges = node.querySelector(".badges");
      if (it.copies > 1) badges.append(el("span", { class: "badge twice", text: `posted ${it.copies} times` }));
      if (it.posted_twice) badges.append(el("span", { class: "badge twice", text: "answered twice" }));
      if (it.dedup_key) badges.append(el("span", { class: "badge key", title: "dedup key", text: it.dedup_key }));
      if (it.mentions.length && it.type === "text") badges.append(el("span", { class: "badge", text: "to " + it.mentions.map((m) => "@" + m.name).join(" ") }));
      if (it.replies.length) badges.append(el("span", { class: "badge", text: `${it.replies.length} answer${it.replies.length === 1 ? "" : "s"}` }));
      if (it.metadata && it.type !== "text") {
        const meta = JSON.stringify(it.metadata);
        if (meta !== "{}") badges.append(el("span", { class: "badge key", text: meta.length > 160 ? meta.slice(0, 160) + "…" : meta }));
      }
      node.querySelector(".life").replaceChildren(...it.life.map((l) => renderLife(it, l)));
      return node;
    }),
  );
  if (atBottom) list.scrollTop = list.scrollHeight;
});

function renderFaults() {
  const f = state.faults;
  const box = $("armed");
  const rules = [];
  f.request.forEach((r, i) => {
    const on = r.nth ? `request ${r.nth}${r.count > 1 ? ` (×${r.count})` : ""}` : `p=${r.probability}`;
    const extra = [r.status ? `status ${r.status}` : "", r.delay ? `delay ${r.delay}` : ""].filter(Boolean).join(", ");
    const spent = f.spent && f.spent[i] ? " (spent)" : "";
    rules.push(`${r.kind} on ${r.endpoint || "any agent endpoint"}, ${on}${extra ? `, ${extra}` : ""}${spent}`);
  });
  for (const r of f.socket) rules.push(`socket ${r.kind} on ${r.event || "any push"}, ${r.nth ? `push ${r.nth}` : `p=${r.probability}`}`);
  if (f.rate_limit) rules.push(`rate limit ${f.rate_limit.per_second}/s, burst ${f.rate_limit.burst || 1}`);
  const fired = Object.entries(f.fired).sort();
  fill(
    box,
    el("p", { text: rules.length ? "Armed:" : "No fault armed." }),
    rules.length ? el("ul", { id: "armed-list" }, ...rules.map((r) => el("li", { text: r }))) : null,
    el("p", { text: fired.length ? "Fired:" : "None fired yet." }),
    fired.length ? el("ul", { id: "fired-list" }, ...fired.map(([k, v]) => el("li", { "data-fault": k, text: `${k}: ${v}` }))) : null,
  );
}

// ---- the user's actions ----

function wire() {
  $("composer").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const r = currentRoom();
    const text = $("say-text").value;
    const mentions = [...$("say-mentions").querySelectorAll("input:checked")].map((i) => i.value);
    if (!r) return;
    if (mentions.length === 0) {
      notify("Say: mention at least one participant");
      return;
    }
    act("Say", async () => {
      await call("POST", "/say", { room: r.id, from: $("say-from").value, text, mentions });
      $("say-text").value = "";
      $("say-text").focus();
    });
  });
  $("say-text").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
      ev.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("say-from").addEventListener("change", renderMentions);

  const roomAction = (id, label, path, body) =>
    $(id).addEventListener("click", () => act(label, () => call("POST", path, body(currentRoom()))));
  roomAction("room-stop", "Stop room", "/stop", (r) => ({ room: r.id }));
  roomAction("room-play", "Play room", "/play", (r) => ({ room: r.id }));
  roomAction("room-interrupt", "Interrupt room", "/interrupt", (r) => ({ room: r.id }));

  $("add-member").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const r = currentRoom();
    act("Add participant", () => call("POST", "/participants", { room: r.id, participant: $("add-who").value, role: $("add-role").value }));
  });

  $("create-room").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const members = [...$("room-members").querySelectorAll("input:checked")].map((i) => i.value);
    act("Create room", async () => {
      const made = await call("POST", "/rooms", { title: $("room-title-input").value, owner: $("room-owner").value, members });
      $("room-title-input").value = "";
      await loadRooms();
      openRoom(made.id);
    });
  });

  $("fault-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const kind = $("fault-kind").value;
    const fault = { kind, endpoint: $("fault-endpoint").value || undefined, nth: Number($("fault-nth").value) || 1 };
    const count = Number($("fault-count").value);
    if (count > 1) fault.count = count;
    if (kind === "fail_before") fault.status = Number($("fault-status").value) || 503;
    if (kind === "delay" || kind === "apply_late") fault.delay = $("fault-delay").value;
    act("Arm fault", () => call("POST", "/faults", { request: [fault] }));
  });
  $("rate-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const rate = { per_second: Number($("rate-per-second").value), burst: Number($("rate-burst").value) || 1, retry_after: true };
    act("Set rate limit", () => call("POST", "/faults", { rate_limit: rate }));
  });
  $("faults-clear").addEventListener("click", () => act("Clear faults", () => call("DELETE", "/faults")));
}

wire();
connectFeed();
