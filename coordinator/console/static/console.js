// The console's one script: short polling of the JSON the pages name, no inline code.
// Everything it writes into the page goes through textContent, never as markup.
"use strict";

(function () {
  const POLL_MS = 1500;
  // Once the operator submits a form, its answer is what the page shows next: a poll that
  // saw the run end meanwhile must not navigate away and lose that answer (its notice).
  // A download (data-download) leaves the page where it is, so it changes nothing.
  let submitted = false;
  document.addEventListener("submit", function (event) {
    if (!event.target.hasAttribute("data-download")) submitted = true;
  });

  async function fetchJson(url) {
    let response;
    try {
      response = await fetch(url, {
        credentials: "same-origin",
        cache: "no-store",
        headers: { Accept: "application/json" },
      });
    } catch (error) {
      return null; // the coordinator is restarting or gone; try again at the next tick
    }
    if (response.status === 401) {
      window.location.reload(); // the session ended: the server sends the login form
      return null;
    }
    return response.ok ? response.json() : null;
  }

  function cell(text) {
    const td = document.createElement("td");
    td.textContent = text;
    return td;
  }

  function stateClass(state) {
    return "state state-" + String(state).toLowerCase().replace(/[^a-z_]/g, "");
  }

  function runRow(run, base) {
    const row = document.createElement("tr");
    row.dataset.run = run.run_id;
    const link = document.createElement("a");
    link.href = base + encodeURIComponent(run.run_id);
    link.textContent = run.run_id;
    const first = document.createElement("td");
    first.append(link);
    const state = document.createElement("span");
    state.className = stateClass(run.state);
    state.textContent = run.state;
    const second = document.createElement("td");
    second.append(state);
    row.append(first, cell(run.kind || "-"), second, cell(run.age));
    row.append(cell(run.targets.join(", ") || "-"), cell(run.reason || "-"));
    return row;
  }

  function followRuns(table) {
    const base = table.dataset.runBase;
    async function tick() {
      const page = await fetchJson(table.dataset.poll);
      if (page) {
        const body = document.createElement("tbody");
        for (const run of page.runs) body.append(runRow(run, base));
        if (!page.runs.length) {
          const empty = cell("No runs recorded.");
          empty.colSpan = 6;
          const row = document.createElement("tr");
          row.append(empty);
          body.append(row);
        }
        table.tBodies[0].replaceWith(body);
      }
      window.setTimeout(tick, POLL_MS);
    }
    window.setTimeout(tick, POLL_MS);
  }

  function followRun(main) {
    const initial = main.dataset.runState;
    if (initial !== "live") return; // a finished run does not change
    async function tick() {
      const run = await fetchJson(main.dataset.runPoll);
      if (run) {
        const state = document.getElementById("run-state");
        state.textContent = run.state;
        state.className = stateClass(run.state);
        for (const branch of run.branches) {
          const row = document.querySelector('tr[data-branch="' + CSS.escape(branch.branch) + '"]');
          if (!row) continue;
          for (const field of ["state", "remote_state", "reason"]) {
            const target = row.querySelector('[data-field="' + field + '"]');
            if (target) target.textContent = branch[field] || "-";
          }
        }
        if (run.state !== initial && !submitted) {
          // ended: the whole page (timeline, artifacts) anew, by GET whatever showed it
          window.location.assign(main.dataset.runUrl);
          return;
        }
      }
      window.setTimeout(tick, POLL_MS);
    }
    window.setTimeout(tick, POLL_MS);
  }

  document.addEventListener("DOMContentLoaded", function () {
    const runs = document.getElementById("runs");
    if (runs && runs.dataset.poll) followRuns(runs);
    const main = document.getElementById("main");
    if (main && main.dataset.runPoll) followRun(main);
  });
})();
