// Live progress of a running run: poll its status JSON and update the step rows in place.
// The page reads fine without this script; it only saves a reload while the run runs.
(function () {
  const table = document.getElementById("steps");
  if (!table || table.dataset.finished === "true") return;
  const url = table.dataset.statusUrl;
  const note = document.getElementById("live-note");
  const stateSlot = document.getElementById("run-state");
  const POLL_MS = 2000;

  function badge(state) {
    const span = document.createElement("span");
    span.className = "badge s-" + state;
    span.dataset.state = state;
    span.textContent = state;  // textContent: never HTML from the server
    return span;
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    if (seconds < 60) return seconds.toFixed(1) + " s";
    const m = Math.floor(Math.round(seconds) / 60), s = Math.round(seconds) % 60;
    return m + " min " + String(s).padStart(2, "0") + " s";
  }

  function rowFor(name) {
    let row = table.querySelector('tr[data-step="' + CSS.escape(name) + '"]');
    if (!row) {
      row = document.createElement("tr");
      row.dataset.step = name;
      const th = document.createElement("th");
      th.scope = "row";
      th.textContent = name;
      const status = document.createElement("td");
      status.className = "status";
      const dur = document.createElement("td");
      dur.className = "duration";
      row.append(th, status, dur, document.createElement("td"), document.createElement("td"));
      table.tBodies[0].appendChild(row);
    }
    return row;
  }

  async function poll() {
    let body;
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
      if (!response.ok) throw new Error(response.status);
      body = await response.json();
    } catch (err) {
      setTimeout(poll, POLL_MS * 3);  // the server may be restarting: back off, keep trying
      return;
    }
    for (const step of body.steps) {
      const row = rowFor(step.name);
      const cell = row.querySelector("td.status");
      cell.replaceChildren(badge(step.status));
      row.querySelector("td.duration").textContent = duration(step.duration_s);
    }
    stateSlot.replaceChildren(badge(body.state));
    if (body.finished) {
      note.hidden = false;
      note.replaceChildren("The run finished (" + body.state + "). ");
      const link = document.createElement("a");
      link.href = window.location.pathname;
      link.textContent = "Show its failures and test results";
      note.appendChild(link);
      table.dataset.finished = "true";
      return;
    }
    setTimeout(poll, POLL_MS);
  }
  setTimeout(poll, POLL_MS);
})();
