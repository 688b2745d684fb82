// check.mjs drives fakeband's console in a real headless Chromium (Debian's
// chromium package) with playwright-core, against a running fakeband whose
// ready-made room "demo" has the echo agent running as its own process:
//
//   1. say a message as ada and see echo's reply appear, the message processed;
//   2. press Stop room, say again (from the keyboard), see the message held
//      (delivered, echo stopped there) with no answer;
//   3. press Play room (from the keyboard) and see it answered once;
//   4. arm a lost response on the reply POST from the faults form, say once
//      more, and see the guard keep it to one reply: the lost request shown
//      in the message's life, one answer, no "posted twice" badge;
//   5. post that reply a second time as a naive agent would (REST, echo's
//      key) and see the badge appear: the check above can fail;
//   6. the page at a narrow width, and its controls' labels.
//
// Usage: start fakeband and echo, then
//
//	npm ci && FAKEBAND_URL=http://127.0.0.1:PORT node check.mjs
//
// CHROMIUM names the browser (default /usr/bin/chromium); SCREENSHOTS, when
// set, is a directory the main views are written to as console-*.png. It
// prints one line per step and exits 0 when every step passed, 1 otherwise.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const STEP_TIMEOUT_MS = 60000; // a loaded CI machine; the steps wait for events, never sleep
const root = (process.env.FAKEBAND_URL || "").replace(/\/$/, "");
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const shots = process.env.SCREENSHOTS || "";

let browser = null;
let profile = null;

async function finish(code) {
  if (browser) await browser.close().catch(() => {});
  if (profile) rmSync(profile, { recursive: true, force: true });
  process.exit(code);
}

async function fail(why) {
  console.log(`FAIL: ${why}`);
  await finish(1);
}

function ok(step) {
  console.log(`ok: ${step}`);
}

if (!root) await fail("FAKEBAND_URL is not set");

// admin reads or drives the fake directly, as a test harness does (no Origin).
async function admin(method, path, body) {
  const resp = await fetch(root + "/_admin" + path, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  if (!resp.ok) await fail(`${method} ${path} answered ${resp.status}: ${text}`);
  return JSON.parse(text).data;
}

profile = mkdtempSync(join(tmpdir(), "fakeband-console-chromium-"));
try {
  // A fresh profile (--user-data-dir) each run; no background traffic.
  browser = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
} catch (err) {
  await fail(`launching ${executablePath}: ${err.message}`);
}
const page = browser.pages()[0] || (await browser.newPage());
page.setDefaultTimeout(STEP_TIMEOUT_MS);
const problems = [];
page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
page.on("console", (msg) => {
  if (msg.type() === "error") problems.push(`console error: ${msg.text()}`);
});
// Nothing but the fake: a request anywhere else fails the check.
page.on("request", (req) => {
  if (!req.url().startsWith(root + "/")) problems.push(`request off the fake: ${req.url()}`);
});

async function step(name, fn) {
  try {
    await fn();
  } catch (err) {
    await fail(`${name}: ${err.message.split("\n")[0]}`);
  }
  if (problems.length) await fail(`${name}: ${problems.join("; ")}`);
  ok(name);
}

async function shot(name) {
  if (shots) await page.screenshot({ path: join(shots, `console-${name}.png`) });
}

// scrollTo brings an entry into view for a screenshot. The live feed
// redraws the timeline, so the element found may be replaced before the
// scroll: find it again, a bounded number of times.
async function scrollTo(locator) {
  for (let i = 0; ; i++) {
    try {
      await locator.scrollIntoViewIfNeeded();
      return;
    } catch (err) {
      if (i >= 50 || !/not attached/.test(String(err))) throw err;
    }
  }
}

// message is the timeline entry of the human message with this text.
const message = (text) => page.locator(`li.item[data-sender-type="User"]`, { has: page.locator(".text", { hasText: text }) });
const replyTo = (text) => page.locator(`li.item[data-sender-type="Agent"]`, { has: page.locator(".text", { hasText: `echo: ${text}` }) });
const life = (text) => message(text).locator(`details[data-agent="echo"]`);

async function attr(locator, name) {
  return locator.getAttribute(name);
}

async function expectAttr(locator, name, want) {
  await locator.and(page.locator(`[${name}="${want}"]`)).waitFor();
}

await step("open the console", async () => {
  await page.goto(root + "/");
  await page.locator(`#live[data-state="live"]`).waitFor();
  await page.locator(`#rooms button[data-room="demo"][aria-current="true"]`).waitFor();
  await page.locator(`#agents li[data-agent="echo"]`).waitFor();
});

await step("say as ada, see echo's reply appear", async () => {
  const from = await page.locator("#say-from option:checked").textContent();
  if (from !== "ada") throw new Error(`the composer speaks as ${from}, not the room's owner ada`);
  await page.getByLabel("Message").fill("hello from the console");
  await page.getByRole("button", { name: "Say", exact: true }).click();
  await replyTo("hello from the console").waitFor();
  await expectAttr(life("hello from the console"), "data-status", "processed");
  await expectAttr(message("hello from the console"), "data-replies", "1");
  await shot("conversation");
});

await step("press stop, say again: held, nothing answered", async () => {
  await page.getByRole("button", { name: "Stop room" }).click();
  await page.locator(`#rooms button[data-room="demo"] .stopped-tag`).waitFor();
  // From the keyboard: the text area, Ctrl+Enter.
  await page.getByLabel("Message").focus();
  await page.keyboard.type("while stopped");
  await page.keyboard.press("Control+Enter");
  const held = life("while stopped");
  await expectAttr(held, "data-held", "true");
  await expectAttr(held, "data-status", "delivered");
  // The fake's truth, read at the same moment: delivered, echo stopped, no reply.
  const t = await admin("GET", "/timeline?room=demo");
  const m = t.items.find((i) => i.sender_type === "User" && i.text.endsWith("while stopped"));
  if (!m) throw new Error("the held message is not in the fake's timeline");
  if (m.replies.length !== 0) throw new Error(`a stopped agent answered: ${m.replies.length} replies`);
  if (!t.executions.every((e) => e.stopped)) throw new Error("the truth does not show echo stopped");
  if ((await replyTo("while stopped").count()) !== 0) throw new Error("the page shows an answer while stopped");
  await held.locator("summary").click();
  await shot("stopped");
});

await step("press play: answered once", async () => {
  await page.getByRole("button", { name: "Play room" }).focus();
  await page.keyboard.press("Enter");
  await expectAttr(life("while stopped"), "data-status", "processed");
  await replyTo("while stopped").waitFor();
  await expectAttr(message("while stopped"), "data-replies", "1");
  const n = await replyTo("while stopped").count();
  if (n !== 1) throw new Error(`${n} replies after play`);
});

await step("arm a lost response on the reply POST: the guard keeps one reply", async () => {
  await page.getByLabel("Kind").selectOption("lose_response");
  await page.getByLabel("Endpoint").selectOption("post");
  await page.getByLabel("On request n°").fill("1");
  await page.getByRole("button", { name: "Arm fault" }).click();
  await page.locator("#armed-list li", { hasText: "lose_response on post, request 1" }).waitFor();
  await page.getByLabel("Message").fill("lost once");
  await page.getByRole("button", { name: "Say", exact: true }).click();
  await page.locator(`#fired-list li[data-fault="post/lose_response"]`, { hasText: "post/lose_response: 1" }).waitFor();
  await expectAttr(life("lost once"), "data-status", "processed");
  await page.locator("#armed-list li", { hasText: "lose_response on post, request 1 (spent)" }).waitFor();
  await life("lost once").locator("summary").click();
  await life("lost once").locator(`li[data-endpoint="post"][data-outcome="lost"]`).waitFor();
  await scrollTo(replyTo("lost once"));
  await expectAttr(message("lost once"), "data-replies", "1");
  await expectAttr(message("lost once"), "data-posted-twice", "false");
  const n = await replyTo("lost once").count();
  if (n !== 1) throw new Error(`${n} replies shown`);
  if ((await page.locator(".badge.twice").count()) !== 0) throw new Error("a posted-twice badge is shown");
  await shot("lost-response");
});

await step("a reply posted twice gets the badge", async () => {
  const setup = await admin("GET", "/setup");
  const echo = setup.agents.find((a) => a.name === "echo");
  const t = await admin("GET", "/timeline?room=demo");
  const m = t.items.find((i) => i.sender_type === "User" && i.text.endsWith("lost once"));
  const reply = t.items.find((i) => i.id === m.replies[0]);
  // A naive agent retrying the lost POST: the same reply again, key and all.
  const resp = await fetch(`${root}/api/v1/agent/chats/${t.room.id}/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": echo.api_key },
    body: JSON.stringify({ message: { content: reply.content.replace(/^(@\[\[[^\]]+\]\]\s*)+/, ""), mentions: [{ id: m.sender_id }] } }),
  });
  if (resp.status !== 200 && resp.status !== 201) throw new Error(`the duplicate post answered ${resp.status}`);
  await expectAttr(message("lost once"), "data-posted-twice", "true");
  await message("lost once").locator(".badge.twice", { hasText: "answered twice" }).waitFor();
  await page.locator(`li.item[data-copies="2"] .badge.twice`, { hasText: "posted 2 times" }).first().waitFor();
  await scrollTo(message("lost once"));
  await shot("posted-twice");
});

await step("an agent's events appear in the timeline, each with its type", async () => {
  const setup = await admin("GET", "/setup");
  const echo = setup.agents.find((a) => a.name === "echo");
  const room = setup.rooms.find((r) => r.title === "demo");
  const events = [
    ["thought", "the user wants a tool", { step: 1 }],
    ["tool_call", "lookup(\"weather\")", { tool: "lookup" }],
    ["tool_result", "sunny", { tool: "lookup" }],
    ["error", "the tool was slow", null],
    ["attention", "a human should look", { kind: "review" }],
    ["task", "task #1 updated", null],
  ];
  for (const [type, content, metadata] of events) {
    const event = { message_type: type, content };
    if (metadata) event.metadata = metadata;
    const resp = await fetch(`${root}/api/v1/agent/chats/${room.id}/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": echo.api_key },
      body: JSON.stringify({ event }),
    });
    if (!resp.ok) throw new Error(`POST events (${type}) answered ${resp.status}: ${await resp.text()}`);
  }
  for (const [type, content] of events) {
    await page.locator(`li.item.event[data-type="${type}"] .text`, { hasText: content }).waitFor();
  }
  await page.locator(`li.item.event[data-type="tool_call"] .badge.key`, { hasText: '{"tool":"lookup"}' }).waitFor();
  await scrollTo(page.locator(`li.item.event[data-type="task"]`));
  await shot("events");
});

await step("create a room, with unread counts for the others", async () => {
  await page.getByLabel("Title").fill("support");
  await page.getByLabel("Owner").selectOption({ label: "ada" });
  await page.getByRole("button", { name: "Create room" }).click();
  await page.locator(`#rooms button[data-room="support"][aria-current="true"]`).waitFor();
  await page.locator(`#members li`, { hasText: "echo (agent, member)" }).waitFor();
  // Someone speaks in demo while support is open: demo counts it, and echo's answer.
  await admin("POST", "/say", { room: "demo", text: "meanwhile, in demo" });
  await page.locator(`#rooms button[data-room="demo"] .unread[data-count="2"]`).waitFor();
  await page.getByLabel("Message").fill("status, please");
  await page.getByRole("button", { name: "Say", exact: true }).click();
  await replyTo("status, please").waitFor();
  await shot("rooms");
});

await step("add and remove a participant", async () => {
  await page.getByLabel("Add", { exact: true }).selectOption({ label: "Owner (human)" });
  await page.getByRole("button", { name: "Add participant" }).click();
  await page.locator(`#members li`, { hasText: "Owner (human, member)" }).waitFor();
  await page.getByRole("button", { name: "Remove Owner from the room" }).click();
  await page.locator(`#members li`, { hasText: "Owner (human" }).waitFor({ state: "detached" });
});

// waitTruth polls the fake's truth until pred holds on it.
async function waitTruth(what, pred) {
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  for (;;) {
    const t = await admin("GET", "/truth");
    if (pred(t)) return t;
    if (Date.now() > deadline) throw new Error(`the truth never showed ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

await step("agent scope: stop, play, interrupt, drop the socket", async () => {
  const count = (t, kind) => t.events.filter((e) => e.kind === kind).length;
  const before = await admin("GET", "/truth");
  // From the keyboard: the focus stays on its button while the page redraws.
  await page.getByRole("button", { name: "Stop echo", exact: true }).focus();
  await page.keyboard.press("Enter");
  await page.locator(`#agents li[data-agent="echo"] .agent-state`, { hasText: "stopped" }).waitFor();
  await page.getByRole("button", { name: "Stop echo", exact: true }).and(page.locator(":focus")).waitFor();
  await page.keyboard.press("Tab");
  await page.keyboard.press("Enter");
  await page.locator(`#agents li[data-agent="echo"] .agent-state`, { hasText: "playing" }).waitFor();
  await page.getByRole("button", { name: "Play echo", exact: true }).and(page.locator(":focus")).waitFor();
  await page.getByRole("button", { name: "Interrupt in this room echo" }).click();
  await page.getByRole("button", { name: "Interrupt everywhere echo" }).click();
  await waitTruth("two interrupts", (t) => count(t, "interrupt") === count(before, "interrupt") + 2);
  await page.getByRole("button", { name: "Drop the socket of echo" }).click();
  await waitTruth("the drop and echo connecting again", (t) => count(t, "drop") === count(before, "drop") + 1 &&
    t.events.findLastIndex((e) => e.kind === "connect") > t.events.findLastIndex((e) => e.kind === "drop"));
});

await step("fail, delay and a rate limit show as armed, and clearing disarms everything", async () => {
  // Far enough ahead that they never fire here: only the form is checked.
  await page.getByLabel("Kind").selectOption("fail_before");
  await page.getByLabel("Endpoint").selectOption("processed");
  await page.getByLabel("On request n°").fill("99");
  await page.getByLabel("Status").fill("500");
  await page.getByRole("button", { name: "Arm fault" }).click();
  await page.locator("#armed-list li", { hasText: "fail_before on processed, request 99, status 500" }).waitFor();
  await page.getByLabel("Kind").selectOption("delay");
  await page.getByLabel("Endpoint").selectOption("me");
  await page.getByLabel("Delay").fill("3s");
  await page.getByRole("button", { name: "Arm fault" }).click();
  await page.locator("#armed-list li", { hasText: "delay on me, request 99, delay 3s" }).waitFor();
  const armed = await admin("GET", "/faults");
  if (armed.request.length !== 3) throw new Error(`${armed.request.length} rules armed, want 3`);
  // Generous enough that echo, resyncing after the drop, is never throttled.
  await page.getByLabel("Rate limit, calls/s").fill("1000");
  await page.getByLabel("burst").fill("1000");
  await page.getByRole("button", { name: "Set rate limit" }).click();
  await page.locator("#armed-list li", { hasText: "rate limit 1000/s, burst 1000" }).waitFor();
  await page.getByRole("button", { name: "Clear all faults" }).click();
  await page.locator("#armed p", { hasText: "No fault armed." }).waitFor();
  await page.locator(`#fired-list li[data-fault="post/lose_response"]`).waitFor(); // the histogram stays
  await page.locator(`#rooms button[data-room="demo"]`).focus();
  await page.keyboard.press("Enter");
  await page.locator(`#rooms button[data-room="demo"][aria-current="true"]`).waitFor();
  await page.locator(`#rooms button[data-room="demo"] .unread[data-count="0"]`).waitFor({ state: "attached" });
});

await step("every control has a label, and the page fits a narrow window", async () => {
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll("input, select, textarea, button")]
      .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !e.textContent.trim())
      .map((e) => e.id || e.outerHTML.slice(0, 60)),
  );
  if (unlabelled.length) throw new Error(`controls without a label: ${unlabelled.join(", ")}`);
  await page.setViewportSize({ width: 420, height: 800 });
  const wide = await page.evaluate(() => document.documentElement.scrollWidth);
  if (wide > 420) throw new Error(`the page is ${wide}px wide in a 420px window`);
  if (shots) await page.screenshot({ path: join(shots, "console-narrow.png"), fullPage: true });
});

console.log("PASS: console");
await finish(0);
