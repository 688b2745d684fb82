// check.mjs connects the official phoenix JavaScript client (the one Band's
// TypeScript SDK uses) to a running fakeband and walks the Phoenix Channels
// V2 conversation an agent needs: connect with the agent's key, join every
// topic Band's official SDKs join (agent_control, agent_rooms and
// agent_contacts of the agent; chat_room and room_participants of its room),
// receive agent.control pushes for stop, play and interrupt, message_created,
// participant_added and participant_removed, room_removed and room_added,
// contact_added and contact_removed,
// get an error reply for a topic that is not the agent's, survive heartbeat
// cycles, and leave.
//
// Usage: start fakeband, paste its export lines into this shell, then
//
//	npm ci && node check.mjs
//
// It needs BAND_API_KEY, BAND_REST_URL (the host root, as the official SDKs
// read it), BAND_WS_URL and FAKEBAND_URL. It prints one line per step and
// exits 0 when every step passed, 1 otherwise.

import { readFileSync } from "node:fs";
import { Socket } from "phoenix";
import WebSocket from "ws";

const STEP_TIMEOUT_MS = 5000;
const HEARTBEAT_MS = 100;
const HEARTBEATS_WANTED = 3;

function fail(why) {
  console.log(`FAIL: ${why}`);
  process.exit(1);
}

function env(name) {
  const value = process.env[name];
  if (!value) fail(`${name} is not set: paste the export lines fakeband printed`);
  return value;
}

const key = env("BAND_API_KEY");
const restURL = env("BAND_REST_URL").replace(/\/$/, "") + "/api/v1";
const socketURL = env("BAND_WS_URL");
const adminURL = env("FAKEBAND_URL").replace(/\/$/, "") + "/_admin";

async function call(method, url, body, headers = {}) {
  const response = await fetch(url, {
    method,
    headers: { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) fail(`${method} ${url} answered ${response.status}: ${text}`);
  return JSON.parse(text).data;
}

// within resolves with what `start` resolves, or fails the check after
// STEP_TIMEOUT_MS naming the step.
function within(step, start) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => fail(`${step}: nothing after ${STEP_TIMEOUT_MS} ms`), STEP_TIMEOUT_MS);
    start((value) => {
      clearTimeout(timer);
      resolve(value);
    });
  });
}

function joined(channel, step) {
  return within(step, (done) => {
    channel
      .join()
      .receive("ok", done)
      .receive("error", (reply) => fail(`${step}: refused: ${JSON.stringify(reply)}`))
      .receive("timeout", () => fail(`${step}: the join timed out`));
  });
}

function pass(what) {
  console.log(`ok: ${what}`);
}

const me = await call("GET", `${restURL}/agent/me`, undefined, { "X-API-Key": key });
const setup = await call("GET", `${adminURL}/setup`);
const room = setup.rooms.find((r) => r.members.some((m) => m.id === me.id));
if (!room) fail(`agent ${me.name} is in no room`);

// The TypeScript SDK authenticates the upgrade with the X-API-Key header,
// which browsers cannot send but Node's ws can.
class KeyedWebSocket extends WebSocket {
  constructor(url, protocols) {
    super(url, protocols, { headers: { "X-API-Key": key } });
  }
}

let heartbeats = 0;
let closes = 0;
const socket = new Socket(socketURL.replace(/\/websocket$/, ""), {
  transport: KeyedWebSocket,
  params: { agent_id: me.id },
  heartbeatIntervalMs: HEARTBEAT_MS,
  reconnectAfterMs: () => 60000, // a silent reconnect would hide a dropped connection
});
socket.onMessage((msg) => {
  if (msg.topic === "phoenix" && msg.event === "phx_reply" && msg.payload.status === "ok") heartbeats++;
});
socket.onClose(() => closes++);
socket.onError((error) => fail(`socket error: ${error && error.message ? error.message : error}`));

await within("connect", (done) => {
  socket.onOpen(done);
  socket.connect();
});
pass(`phoenix.js connected to ${socket.endPointURL()}`);

const control = socket.channel(`agent_control:${me.id}`, {});
const pushes = [];
let onPush = () => {};
control.on("agent.control", (payload) => {
  pushes.push(payload);
  onPush(payload);
});
await joined(control, `join agent_control:${me.id}`);
pass(`joined agent_control:${me.id}`);

const chat = socket.channel(`chat_room:${room.id}`, {});
let onMessage = () => {};
chat.on("message_created", (payload) => onMessage(payload));
await joined(chat, `join chat_room:${room.id}`);
pass(`joined chat_room:${room.id}`);

// The rest of what the SDKs join: TS src/runtime/rooms/AgentRuntime.ts and
// PY src/band/runtime/presence.py (agent_rooms), TS src/platform/ThenvoiLink.ts
// joinRoomTopics and PY src/band/platform/link.py subscribe_room
// (room_participants), and the contacts topic both can join.
const rooms = socket.channel(`agent_rooms:${me.id}`, {});
let onRoom = () => {};
for (const event of ["room_added", "room_removed"]) rooms.on(event, (payload) => onRoom(event, payload));
await joined(rooms, `join agent_rooms:${me.id}`);
pass(`joined agent_rooms:${me.id}`);

const participants = socket.channel(`room_participants:${room.id}`, {});
let onParticipant = () => {};
for (const event of ["participant_added", "participant_removed"]) participants.on(event, (payload) => onParticipant(event, payload));
await joined(participants, `join room_participants:${room.id}`);
pass(`joined room_participants:${room.id}`);

const contacts = socket.channel(`agent_contacts:${me.id}`, {});
let onContact = () => {};
for (const event of ["contact_added", "contact_removed"]) contacts.on(event, (payload) => onContact(event, payload));
await joined(contacts, `join agent_contacts:${me.id}`);
pass(`joined agent_contacts:${me.id}`);

await within("join someone else's control topic", (done) => {
  socket
    .channel("agent_control:not-this-agent", {})
    .join()
    .receive("ok", () => fail("joined another agent's control topic"))
    .receive("error", (reply) => done(reply));
});
pass("another agent's topic is refused with an error reply");

async function expectControl(step, trigger, want) {
  const payload = await within(step, (done) => {
    onPush = done;
    trigger();
  });
  onPush = () => {};
  for (const [field, value] of Object.entries(want)) {
    if (payload[field] !== value) fail(`${step}: ${field} is ${JSON.stringify(payload[field])}, want ${JSON.stringify(value)}`);
  }
  if (!payload.correlation_id) fail(`${step}: no correlation_id`);
  pass(`${step}: agent.control ${JSON.stringify(payload)}`);
}

await expectControl("stop", () => call("POST", `${adminURL}/stop`, { room: room.id }), {
  mode: "stop", scope: "room", room_id: room.id, agent_id: me.id,
});
await expectControl("play", () => call("POST", `${adminURL}/play`, { room: room.id }), {
  mode: "play", scope: "room", room_id: room.id,
});
await expectControl("interrupt", () => call("POST", `${adminURL}/interrupt`, { agent: me.id }), {
  mode: "interrupt", scope: "agent", room_id: null,
});

const text = `hello from phoenix.js ${Date.now()}`;
const created = await within("message_created", (done) => {
  onMessage = (payload) => payload.content.endsWith(text) && done(payload);
  call("POST", `${adminURL}/say`, { room: room.id, text, mentions: [me.id] });
});
pass(`message_created ${created.id} from ${created.sender_type} ${created.sender_id}`);

// want checks a payload has every field, as a string, that the SDKs'
// schemas require (TS src/platform/streaming/payloadSchemas.ts).
function want(step, payload, fields) {
  for (const field of fields) {
    if (typeof payload[field] !== "string") fail(`${step}: ${field} is ${JSON.stringify(payload[field])}, want a string`);
  }
}

async function expectEvent(step, listen, trigger, event, id, fields) {
  const payload = await within(step, (done) => {
    listen((got, p) => got === event && p.id === id && done(p));
    trigger();
  });
  listen(() => {});
  want(step, payload, fields);
  pass(`${step}: ${event} ${JSON.stringify(payload)}`);
}

const listenParticipants = (f) => { onParticipant = f; };
const listenRooms = (f) => { onRoom = f; };
await expectEvent("add the operator",
  listenParticipants, () => call("POST", `${adminURL}/participants`, { room: room.id, participant: setup.owner.id }),
  "participant_added", setup.owner.id, ["id", "name", "type"]);
await expectEvent("remove the operator",
  listenParticipants, () => call("DELETE", `${adminURL}/participants`, { room: room.id, participant: setup.owner.id }),
  "participant_removed", setup.owner.id, ["id"]);
await expectEvent("remove the agent",
  listenRooms, () => call("DELETE", `${adminURL}/participants`, { room: room.id, participant: me.id }),
  "room_removed", room.id, ["id", "status", "type", "title", "removed_at"]);
const listenContacts = (f) => { onContact = f; };
const human = setup.humans[0];
await expectEvent("add a contact",
  listenContacts, () => call("POST", `${adminURL}/contacts`, { agent: me.id, participant: human.id }),
  "contact_added", human.id, ["id", "handle", "name", "type", "inserted_at"]);
await expectEvent("remove the contact",
  listenContacts, () => call("DELETE", `${adminURL}/contacts`, { agent: me.id, participant: human.id }),
  "contact_removed", human.id, ["id"]);
await expectEvent("add the agent back",
  listenRooms, () => call("POST", `${adminURL}/participants`, { room: room.id, participant: me.id }),
  "room_added", room.id, ["id", "inserted_at", "updated_at"]);

const before = heartbeats;
await within(`${HEARTBEATS_WANTED} heartbeats`, (done) => {
  const poll = setInterval(() => {
    if (heartbeats - before >= HEARTBEATS_WANTED) {
      clearInterval(poll);
      done();
    }
  }, HEARTBEAT_MS / 2);
});
if (closes > 0 || !socket.isConnected()) fail("the connection closed during the heartbeat cycles");
pass(`${heartbeats} heartbeats answered every ${HEARTBEAT_MS} ms; still connected`);

await within("leave", (done) => control.leave().receive("ok", done));
pass(`left agent_control:${me.id}`);

socket.disconnect();
const { version } = JSON.parse(readFileSync(new URL("./node_modules/phoenix/package.json", import.meta.url)));
console.log(`PASS: phoenix ${version} speaks to fakeband (${pushes.length} control pushes)`);
process.exit(0);
