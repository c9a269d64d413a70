// A run still going: poll its JSON every second and redraw the label, the recap and the
// tasks until the run has ended. Every value is set as text (textContent), never as HTML.
"use strict";
(function () {
  const section = document.getElementById("run");
  if (!section || section.dataset.finished === "yes") { return; }
  const url = "/api/runs/" + encodeURIComponent(section.dataset.runId);
  const COUNTS = ["ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored"];

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) { node.textContent = String(text); }
    if (className) { node.className = className; }
    return node;
  }

  function row(cells) {
    const tr = document.createElement("tr");
    cells.forEach(function (cell) { tr.appendChild(cell instanceof Node ? cell : el("td", cell)); });
    return tr;
  }

  function drawRecap(run) {
    const body = document.querySelector("#recap tbody");
    body.replaceChildren();
    const hosts = Object.keys(run.recap);
    if (hosts.length === 0) {
      const td = el("td", run.finished ? "none: the run never reached its recap" : "none yet: the run is going on");
      td.colSpan = 8;
      body.appendChild(row([td]));
    }
    hosts.forEach(function (host) {
      body.appendChild(row([host].concat(COUNTS.map(function (k) { return run.recap[host][k] || 0; }))));
    });
  }

  function taskRow(t) {
    const message = el("td");
    message.appendChild(el("pre", t.shown_msg, "msg"));
    if (t.diagnosis) { message.appendChild(el("p", "diagnosis: " + t.diagnosis, "diagnosis")); }
    if (t.log_header) { message.appendChild(el("p", t.log_header, "stream")); }
    if (t.log_tail) { message.appendChild(el("pre", t.log_tail, "log-tail")); }
    ["stdout", "stderr"].forEach(function (stream) {
      const text = t[stream + "_tail"];
      if (text) {
        message.appendChild(el("p", stream + ":", "stream"));
        message.appendChild(el("pre", text, "log-tail " + stream + "-tail"));
      }
    });
    const tr = row([el("td", t.task, "task"), el("td", t.status + (t.changed ? " (changed)" : ""), "status"),
                    t.duration_s.toFixed(1) + "s", message]);
    tr.className = "status-" + t.status;
    return tr;
  }

  function drawTasks(run) {
    const holder = document.getElementById("tasks");
    holder.replaceChildren();
    const hosts = Object.keys(run.tasks);
    if (hosts.length === 0) { holder.appendChild(el("p", "No task has finished yet.")); }
    hosts.forEach(function (host) {
      const box = el("section", null, "host");
      box.appendChild(el("h3", host));
      const table = el("table", null, "tasks");
      const head = document.createElement("thead");
      head.appendChild(row(["Task", "Status", "Duration", "Message"].map(function (h) { return el("th", h); })));
      const body = document.createElement("tbody");
      run.tasks[host].forEach(function (t) { body.appendChild(taskRow(t)); });
      table.append(head, body);
      box.appendChild(table);
      holder.appendChild(box);
    });
  }

  function draw(run) {
    document.getElementById("label").textContent = run.label;
    document.getElementById("in-task").textContent = run.aborted ? "was in" : "now in";  // its controller gone
    document.getElementById("current-task").textContent = run.current_task || "";
    document.getElementById("now-in").hidden = !run.current_task;
    drawRecap(run);
    drawTasks(run);
    section.dataset.finished = run.finished ? "yes" : "no";
  }

  function poll() {
    fetch(url, {credentials: "same-origin"})
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (run) {
        if (run) { draw(run); }
        if (!run || !run.finished) { window.setTimeout(poll, 1000); }
      })
      .catch(function () { window.setTimeout(poll, 3000); });
  }
  window.setTimeout(poll, 1000);
}());
