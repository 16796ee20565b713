// The page's one script. Every page works without it (forms alone); it only shows sooner what a
// form or a reload would: the chosen auth kind's fields, a status as it settles, tabs, requests
// as they come. It writes only what this origin's page rendered (a part of the page asked for
// again), and keeps nothing in storage.
"use strict";

document.documentElement.classList.add("scripted");

// The wizard's Authentication step: the chosen kind's fields only (the others stay in the form,
// so a post loses nothing typed); within a kind, the fields of its chosen source of keys; the
// secret's for kinds, and sources, that have one.
function authKinds() {
  const chooser = document.getElementById("auth-type");
  if (!chooser) return;
  const show = () => {
    const kind = chooser.value;
    let secretless = false;
    for (const section of document.querySelectorAll(".auth-kind")) {
      section.hidden = section.dataset.kind !== kind;
      const from = section.querySelector("input[name$='_keys_from']:checked");
      for (const part of section.querySelectorAll("[data-keys-from]")) {
        part.hidden = from !== null && part.dataset.keysFrom !== from.value;
      }
      secretless ||= !section.hidden && from !== null && from.hasAttribute("data-secretless");
    }
    for (const secret of document.querySelectorAll(".auth-secret")) {
      secret.hidden = secretless || secret.dataset.hiddenFor.split(" ").includes(kind);
    }
  };
  chooser.addEventListener("change", show);
  for (const from of document.querySelectorAll("input[name$='_keys_from']")) {
    from.addEventListener("change", show);
  }
}

// Asks a part of this page again, while the tab is shown: at once, then with backoff (1 s,
// doubling to `most`), until `done` says so. A failed answer waits longer, never shorter.
function poll(url, most, apply) {
  let wait = 1000;
  let timer = null;
  let asking = false; // an answer awaited: the tab shown again then starts no second loop
  let stopped = false;
  const next = () => {
    if (stopped || document.hidden || asking || timer !== null) return;
    timer = setTimeout(ask, wait);
    wait = Math.min(wait * 2, most);
  };
  const ask = async () => {
    timer = null;
    asking = true;
    try {
      const answer = await fetch(url, { credentials: "same-origin", cache: "no-store" });
      if (answer.ok && !answer.redirected) {
        stopped = apply(await answer.text()) === "done";
      }
    } catch (error) {
      // Offline or the operator restarting: asked again later.
    }
    asking = false;
    next();
  };
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && !stopped && timer === null && !asking) {
      wait = 1000;
      next();
    }
  });
  next();
  return () => {
    stopped = true;
    if (timer !== null) clearTimeout(timer);
  };
}

// Replaces `element` with the HTML this page's server rendered for it.
function replaceWith(element, html) {
  const template = document.createElement("template");
  template.innerHTML = html;
  element.replaceChildren(...template.content.childNodes);
}

// A connection's fields and status, until it is Ready for the spec as it is now (after a
// change, or while it waits for its Secret).
function liveFields() {
  const live = document.getElementById("live-fields");
  if (!live) return;
  const final = () => live.querySelector("#fields").dataset.final === "true";
  if (final()) return;
  poll(live.dataset.live, 15000, (html) => {
    replaceWith(live, html);
    return final() ? "done" : "again";
  });
}

// The Requests tab's Follow: its rows as they come, with the filters chosen.
function follow() {
  const box = document.getElementById("follow");
  const table = document.getElementById("request-table");
  if (!box || !table) return;
  box.closest("label").hidden = false;
  let stop = null;
  box.addEventListener("change", () => {
    if (stop) stop();
    stop = null;
    if (box.checked) {
      stop = poll(table.dataset.rows, 5000, (html) => {
        const rows = document.createElement("template");
        rows.innerHTML = `<table>${html}</table>`;
        const body = rows.content.querySelector("tbody");
        if (body) table.tBodies[0].replaceWith(body);
        return "again";
      });
    }
  });
}

// Tabs (WAI-ARIA's pattern): one panel shown; arrow keys, Home and End move between tabs.
function tabs() {
  for (const list of document.querySelectorAll("[role=tablist]")) {
    const all = [...list.querySelectorAll("[role=tab]")];
    const select = (chosen, focus) => {
      for (const tab of all) {
        const on = tab === chosen;
        tab.setAttribute("aria-selected", on ? "true" : "false");
        tab.tabIndex = on ? 0 : -1;
        document.getElementById(tab.getAttribute("aria-controls")).hidden = !on;
      }
      if (focus) chosen.focus();
    };
    const fromHash = all.find((tab) => tab.getAttribute("href") === window.location.hash);
    select(fromHash || all[0], false);
    for (const tab of all) {
      tab.addEventListener("click", (event) => {
        event.preventDefault();
        select(tab, true);
        history.replaceState(null, "", tab.getAttribute("href"));
      });
      tab.addEventListener("keydown", (event) => {
        const at = all.indexOf(tab);
        const to = {
          ArrowRight: all[(at + 1) % all.length],
          ArrowLeft: all[(at - 1 + all.length) % all.length],
          Home: all[0],
          End: all[all.length - 1],
        }[event.key];
        if (to) {
          event.preventDefault();
          select(to, true);
        }
      });
    }
  }
}

authKinds();
liveFields();
follow();
tabs();
