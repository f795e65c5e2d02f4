// Live parts of the dashboard: the fleet table and the progress of runs
// that are going. Text goes in with textContent only: nothing from the
// server is ever parsed as HTML.
"use strict";

// Labels for the stacked layout on a phone, as the page's cells have them.
const FLEET_LABELS = ["Device", "State", "Since", "Platform", "App", "Agent", "Running", "Utilisation"];

function cell(row, text, className) {
  const td = document.createElement("td");
  td.dataset.label = FLEET_LABELS[row.children.length] || "";
  if (className) {
    const badge = document.createElement("span");
    badge.className = "badge " + className;
    badge.textContent = text;
    td.appendChild(badge);
  } else {
    td.textContent = text;
  }
  row.appendChild(td);
  return td;
}

// Busy share in each twelfth of the window, as the page draws it.
function spark(shares) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 48 16");
  shares.forEach((share, index) => {
    const bar = document.createElementNS(ns, "rect");
    bar.setAttribute("x", index * 4);
    bar.setAttribute("y", 16 - share * 16);
    bar.setAttribute("width", 3);
    bar.setAttribute("height", share * 16);
    svg.appendChild(bar);
  });
  return svg;
}

function fleetRow(device) {
  const row = document.createElement("tr");
  row.dataset.device = device.id;
  row.className = device.state;
  cell(row, device.id);
  const state = cell(row, device.state, device.state);
  for (const why of [device.quarantine_reason, device.problem, device.app_problem]) {
    if (!why) continue;
    const reason = document.createElement("small");
    reason.className = "reason";
    reason.textContent = " " + why;
    state.appendChild(reason);
  }
  cell(row, device.since);
  cell(row, device.platform);
  cell(row, ((device.app || "—") + " " + (device.app_version || "")).trim());
  cell(row, device.agent_version || "");
  const running = cell(row, device.session ? "" : device.running_case || "");
  if (device.session) {
    const link = document.createElement("a");
    link.href = "/sessions/" + encodeURIComponent(device.session);
    link.textContent = "WebDriver session";
    running.appendChild(link);
  }
  const td = cell(row, "");
  td.appendChild(spark(device.recent));
  const share = document.createElement("span");
  share.className = "share";
  share.textContent = " " + Math.round(device.utilisation * 100) + "%";
  td.appendChild(share);
  return row;
}

async function refreshFleet(table) {
  try {
    const response = await fetch(table.dataset.live, { headers: { accept: "application/json" } });
    if (!response.ok) return;
    const fleet = await response.json();
    const body = document.createElement("tbody");
    fleet.devices.forEach((device) => body.appendChild(fleetRow(device)));
    table.replaceChild(body, table.tBodies[0]);
  } catch (error) {
    // The coordinator may be restarting: try again at the next tick.
  }
}

async function refreshRuns() {
  const cells = document.querySelectorAll("[data-progress]");
  const going = Array.from(cells).filter((c) => c.closest("tr").classList.contains("running"));
  if (going.length === 0) return;
  try {
    const response = await fetch("/api/v1/runs?result=running", { headers: { accept: "application/json" } });
    if (!response.ok) return;
    const page = await response.json();
    const running = new Map(page.runs.map((run) => [run.id, run]));
    for (const progress of going) {
      const run = running.get(progress.dataset.progress);
      if (run) {
        progress.textContent = (run.finished_attempts || 0) + " of " + (run.cases || 0) + " done";
      } else {
        // It finished: show its totals.
        window.location.reload();
        return;
      }
    }
  } catch (error) {
    // Try again at the next tick.
  }
}

const fleet = document.getElementById("fleet");
if (fleet) {
  setInterval(() => refreshFleet(fleet), 1000);
}
if (document.getElementById("runs")) {
  setInterval(refreshRuns, 2000);
}

// A timeline bar leads to its attempt: open it where the page lands.
function openTarget() {
  const id = decodeURIComponent(window.location.hash.slice(1));
  const target = id && document.getElementById(id);
  if (target && target.tagName === "DETAILS") {
    target.open = true;
  }
}
window.addEventListener("hashchange", openTarget);
openTarget();

// What acts rather than reads (mute, unmute, run the failed again) needs
// the coordinator's client token: asked when the coordinator refuses
// without it, and kept for this tab only.
const TOKEN_KEY = "argus-client-token";

async function act(method, url, body) {
  for (;;) {
    const headers = { accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.authorization = "Bearer " + token;
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const answer = await response.json().catch(() => ({}));
    if (response.status === 401) {
      const given = window.prompt("The coordinator's client token (kept for this tab):");
      if (!given) throw new Error("this needs the coordinator's client token");
      sessionStorage.setItem(TOKEN_KEY, given.trim());
      continue;
    }
    // The API says what went wrong as `error`, the WebDriver facade as
    // `value.message`.
    const said = answer.error || (answer.value && answer.value.message);
    if (!response.ok) throw new Error(said || response.status + " " + response.statusText);
    return answer;
  }
}

function mutePath(form) {
  return "/api/v1/mutes/" + encodeURIComponent(form.dataset.project) + "/" + encodeURIComponent(form.dataset.case);
}

async function onAct(form) {
  const status = form.querySelector(".act-status");
  const say = (text) => { if (status) status.textContent = text; };
  const button = form.querySelector("button");
  button.disabled = true;
  say("…");
  try {
    if (form.classList.contains("mute")) {
      const data = new FormData(form);
      await act("PUT", mutePath(form), {
        reason: data.get("reason") || "",
        until: data.get("until") || null,
        owner: data.get("owner") || "",
      });
      window.location.reload();
    } else if (form.classList.contains("unmute")) {
      await act("DELETE", mutePath(form) + "?reason=" + encodeURIComponent("unmuted on the dashboard"));
      window.location.reload();
    } else if (form.classList.contains("rerun")) {
      const muted = form.querySelector("input[name=muted]");
      const rerun = await act("POST", "/api/v1/runs/" + encodeURIComponent(form.dataset.run) + "/rerun-failed", {
        muted: Boolean(muted && muted.checked),
      });
      window.location.assign(rerun.url);
    }
  } catch (error) {
    say(error.message);
    button.disabled = false;
  }
}

for (const form of document.querySelectorAll("form.act")) {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    onAct(form);
  });
}

// An attempt's device log, read when it is opened and shown as text (never
// as markup); the search box keeps the lines that hold what it says.
for (const box of document.querySelectorAll("details.device-log")) {
  const pre = box.querySelector("pre.log");
  const filter = box.querySelector("input.log-filter");
  let lines = null;
  const show = () => {
    if (lines === null) return;
    const wanted = filter.value.toLowerCase();
    const kept = wanted ? lines.filter((l) => l.toLowerCase().includes(wanted)) : lines;
    pre.textContent = kept.join("\n");
  };
  box.addEventListener("toggle", async () => {
    if (!box.open || lines !== null) return;
    pre.textContent = "…";
    try {
      const response = await fetch(box.dataset.src);
      if (!response.ok) throw new Error(response.status + " " + response.statusText);
      lines = (await response.text()).split("\n");
      show();
    } catch (error) {
      pre.textContent = "the device log could not be read: " + error.message;
    }
  });
  filter.addEventListener("input", show);
}

// The live view: each device's screen drawn from its latest snapshot, every
// element a box in its frame with its text (textContent only), covered
// ones dimmed, hidden ones outlined; the route above it.
function elementClass(element) {
  const kind = String(element.kind || "view").replace(/[^a-z0-9-]/gi, "");
  let name = "el kind-" + kind;
  if (element.covered) name += " covered";
  if (element.hidden) name += " hidden";
  if (element.disabled) name += " disabled";
  return name;
}

function drawScreen(box, view) {
  const [w, h] = view.window;
  const width = box.clientWidth || 180;
  const scale = w > 0 ? width / w : 1;
  const nodes = [];
  for (const element of view.elements) {
    const node = document.createElement("div");
    node.className = elementClass(element);
    node.textContent = element.text || element.value || "";
    node.title = [element.kind, element.test_id, element.hidden && "hidden: " + element.hidden, element.covered && "covered", element.disabled && "disabled"]
      .filter(Boolean)
      .join(" · ");
    if (element.test_id) node.dataset.testId = element.test_id;
    if (element.frame) {
      const [x, y, fw, fh] = element.frame;
      node.style.left = x * scale + "px";
      node.style.top = y * scale + "px";
      node.style.width = Math.max(fw * scale, 1) + "px";
      node.style.height = Math.max(fh * scale, 1) + "px";
    } else {
      // A record kept before frames were: the elements in order.
      node.classList.add("unplaced");
    }
    nodes.push(node);
  }
  box.style.height = (w > 0 && h > 0 ? h * scale : 240) + "px";
  // Text as large as the app draws it (12 points), scaled with the screen.
  box.style.fontSize = (w > 0 ? 12 * scale : 12) + "px";
  box.classList.toggle("framed", nodes.every((n) => !n.classList.contains("unplaced")));
  box.replaceChildren(...nodes);
  box.dataset.route = view.route || "";
  box.dataset.scale = scale;
}

function screenCaption(view) {
  const parts = [];
  if (view.case_id) parts.push(view.case_id + " #" + view.attempt);
  if (view.step) parts.push("step " + (view.step_index + 1) + ": " + view.step);
  parts.push("route " + (view.route || "—"));
  if (view.busy) parts.push("busy");
  return parts.join(" · ");
}

function screenCard(view) {
  const card = document.createElement("a");
  card.className = "screen-card" + (view.run_id ? " running" : "");
  card.href = "/fleet/" + view.device.split("/").map(encodeURIComponent).join("/");
  card.dataset.device = view.device;
  const head = document.createElement("strong");
  head.textContent = view.device;
  const caption = document.createElement("p");
  caption.className = "screen-caption";
  caption.textContent = screenCaption(view);
  const screen = document.createElement("div");
  screen.className = "screen";
  card.append(head, caption, screen);
  return card;
}

async function refreshScreens(section) {
  try {
    const response = await fetch(section.dataset.live, { headers: { accept: "application/json" } });
    if (!response.ok) return;
    const { devices } = await response.json();
    // Busy devices first: what runs is what a person came to see.
    devices.sort((a, b) => (b.run_id ? 1 : 0) - (a.run_id ? 1 : 0) || a.device.localeCompare(b.device));
    const cards = devices.map((view) => {
      const known = section.querySelector(`[data-device="${CSS.escape(view.device)}"]`);
      const stamp = view.received_ms + ":" + view.read_ms;
      if (known && known.dataset.stamp === stamp) return known;
      const card = screenCard(view);
      card.dataset.stamp = stamp;
      return card;
    });
    section.replaceChildren(...cards);
    for (const card of cards) {
      const view = devices[cards.indexOf(card)];
      const screen = card.querySelector(".screen");
      if (screen.dataset.drawn !== card.dataset.stamp) {
        drawScreen(screen, view);
        screen.dataset.drawn = card.dataset.stamp;
      }
    }
  } catch (error) {
    // The coordinator may be restarting: try again at the next tick.
  }
}

const screens = document.getElementById("screens");
if (screens) {
  refreshScreens(screens);
  setInterval(() => refreshScreens(screens), 500);
}

async function refreshDevice(root) {
  try {
    const response = await fetch(root.dataset.live, { headers: { accept: "application/json" } });
    if (!response.ok) return;
    const view = await response.json();
    root.querySelector("[data-caption]").textContent = view.read_ms ? screenCaption(view) : "waiting for the first screen…";
    drawScreen(root.querySelector("[data-screen]"), view);
    const trace = root.querySelector("[data-trace]");
    trace.replaceChildren(
      ...view.trace.map((line) => {
        const item = document.createElement("li");
        item.textContent = line;
        return item;
      }),
    );
  } catch (error) {
    // Try again at the next tick.
  }
}

const deviceLive = document.getElementById("device-live");
if (deviceLive) {
  refreshDevice(deviceLive);
  setInterval(() => refreshDevice(deviceLive), 500);
}

// An attempt replayed step by step from its record: a scrubber over its
// steps; at each, the screen after it (and its baseline's at the same step,
// with the elements that differ marked), what it sent and raised, its
// screenshot and its place in the film.
function replayPane(title) {
  const pane = document.createElement("figure");
  pane.className = "replay-pane";
  const caption = document.createElement("figcaption");
  caption.textContent = title;
  const screen = document.createElement("div");
  screen.className = "screen";
  pane.append(caption, screen);
  return pane;
}

function drawStep(pane, step) {
  const screen = pane.querySelector(".screen");
  if (!step || !step.screen_read) {
    screen.replaceChildren();
    screen.style.height = "";
    screen.dataset.route = "";
    screen.textContent = step ? "no screen was read after this step" : "no such step";
    return;
  }
  drawScreen(screen, step);
  for (const index of step.differs) {
    if (screen.children[index]) screen.children[index].classList.add("differs");
  }
}

function listOf(title, lines) {
  const section = document.createElement("div");
  if (!lines.length) return section;
  const head = document.createElement("h5");
  head.textContent = title;
  const list = document.createElement("ul");
  for (const line of lines) {
    const item = document.createElement("li");
    item.textContent = line;
    list.appendChild(item);
  }
  section.append(head, list);
  return section;
}

function showReplay(body, replay, files, film) {
  const steps = replay.steps;
  if (!steps.length) {
    body.textContent = "the record holds no step";
    return;
  }
  const failed = steps.findIndex((s) => s.status === "failed");
  const scrubber = document.createElement("input");
  scrubber.type = "range";
  scrubber.className = "scrubber";
  scrubber.min = 0;
  scrubber.max = steps.length - 1;
  scrubber.value = failed >= 0 ? failed : 0;
  scrubber.setAttribute("aria-label", "Step");
  const label = document.createElement("p");
  label.className = "replay-step";
  const panes = document.createElement("div");
  panes.className = "replay-panes";
  const mine = replayPane("This attempt on " + replay.device);
  panes.appendChild(mine);
  let theirs = null;
  if (replay.baseline) {
    const b = replay.baseline;
    theirs = replayPane("Last pass: run " + b.run_id + " attempt " + b.attempt + " on " + b.device);
    panes.appendChild(theirs);
  }
  const about = document.createElement("div");
  about.className = "replay-about";
  const show = () => {
    const step = steps[Number(scrubber.value)];
    label.textContent =
      "Step " + (step.index + 1) + " of " + steps.length + ": " + step.step + " · " + step.status + " · " + step.ms + " ms" +
      (step.route ? " · route " + step.route : "") + (step.error ? " · " + step.error : "");
    drawStep(mine, step);
    if (theirs) drawStep(theirs, replay.baseline.steps.find((s) => s.index === step.index));
    const parts = [listOf("Requests", step.requests), listOf("Events", step.events), listOf("Problems", step.problems)];
    if (step.screenshot) {
      const link = document.createElement("a");
      link.href = files + step.screenshot.split("/").map(encodeURIComponent).join("/");
      link.textContent = "Screenshot of this step";
      parts.push(link);
    }
    if (film && step.video_s != null) {
      const seek = document.createElement("button");
      seek.type = "button";
      seek.textContent = "Film at " + step.video_s.toFixed(1) + " s";
      seek.addEventListener("click", () => {
        film.currentTime = step.video_s;
        film.scrollIntoView({ block: "nearest" });
      });
      parts.push(seek);
    }
    about.replaceChildren(...parts);
  };
  scrubber.addEventListener("input", show);
  body.replaceChildren(scrubber, label, panes, about);
  show();
}

for (const box of document.querySelectorAll("details.replay")) {
  let loaded = false;
  box.addEventListener("toggle", async () => {
    if (!box.open || loaded) return;
    loaded = true;
    const body = box.querySelector(".replay-body");
    body.textContent = "…";
    try {
      const response = await fetch(box.dataset.src, { headers: { accept: "application/json" } });
      const answer = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(answer.error || response.status + " " + response.statusText);
      const attempt = box.closest("details.attempt");
      showReplay(body, answer, box.dataset.files, attempt && attempt.querySelector("video.film"));
    } catch (error) {
      body.textContent = error.message;
    }
  });
}

// Borrowing a device: a WebDriver session held from its page, through the
// coordinator's own facade (so it leaves the pool fairly, comes back at the
// end, and each action is recorded as the session's command).
async function webdriver(method, path, body) {
  return (await act(method, path, body)).value;
}

const borrow = document.getElementById("borrow");
if (borrow && deviceLive) {
  const status = borrow.querySelector("[data-status]");
  const panel = borrow.querySelector("[data-borrowed]");
  const start = borrow.querySelector("[data-borrow]");
  const screen = deviceLive.querySelector("[data-screen]");
  let session = null;
  const say = (text) => { status.textContent = text; };
  const run = async (what, action) => {
    say(what + "…");
    try {
      await action();
      say(what + ": done");
    } catch (error) {
      say(what + ": " + error.message);
    }
  };
  const execute = (script, args) =>
    webdriver("POST", "/session/" + session + "/execute/sync", { script, args: args === undefined ? [] : [args] });
  const held = (on) => {
    panel.hidden = !on;
    start.hidden = on;
    screen.classList.toggle("tappable", on);
  };
  start.addEventListener("click", () =>
    run("Borrowing", async () => {
      // The coordinator's word on what it does now, not the screen's.
      const fleet = await (await fetch("/api/v1/fleet", { headers: { accept: "application/json" } })).json();
      const device = fleet.devices.find((d) => d.id === borrow.dataset.device);
      if (device && device.running_case) {
        throw new Error("it runs an attempt (" + device.running_case + "); try again when it is idle");
      }
      const created = await webdriver("POST", "/session", {
        capabilities: {
          alwaysMatch: {
            "appium:deviceName": borrow.dataset.device,
            "appium:noReset": true,
            "lynkeus:queueTimeoutMs": 2000,
            "lynkeus:idleTimeoutMs": 300000,
          },
        },
      });
      session = created.sessionId;
      const link = panel.querySelector("[data-session]");
      link.href = "/sessions/" + encodeURIComponent(session);
      link.textContent = "WebDriver session " + session;
      held(true);
    }),
  );
  screen.addEventListener("click", (event) => {
    if (!session) return;
    const scale = Number(screen.dataset.scale) || 1;
    const rect = screen.getBoundingClientRect();
    const x = Math.round((event.clientX - rect.left) / scale);
    const y = Math.round((event.clientY - rect.top) / scale);
    run("Press at " + x + ", " + y, () => execute("mobile: tap", { x, y }));
  });
  borrow.querySelector("[data-type]").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = new FormData(event.target).get("text") || "";
    const keys = [...text].flatMap((key) => [{ type: "keyDown", value: key }, { type: "keyUp", value: key }]);
    run("Typing", () => webdriver("POST", "/session/" + session + "/actions", { actions: [{ type: "key", id: "keyboard", actions: keys }] }));
  });
  borrow.querySelector("[data-link]").addEventListener("submit", (event) => {
    event.preventDefault();
    const url = new FormData(event.target).get("url") || "";
    run("Opening " + url, () => execute("mobile: deepLink", { url }));
  });
  borrow.querySelector("[data-back]").addEventListener("click", () =>
    run("Back", () => webdriver("POST", "/session/" + session + "/back", {})),
  );
  borrow.querySelector("[data-reset]").addEventListener("click", () => run("Reset", () => execute("mobile: reset")));
  borrow.querySelector("[data-release]").addEventListener("click", () =>
    run("Releasing", async () => {
      await webdriver("DELETE", "/session/" + session);
      session = null;
      held(false);
    }),
  );
  // Leaving the page gives the device back at once.
  window.addEventListener("pagehide", () => {
    if (!session) return;
    const headers = {};
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.authorization = "Bearer " + token;
    fetch("/session/" + session, { method: "DELETE", headers, keepalive: true });
  });
}
