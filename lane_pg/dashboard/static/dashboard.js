// lane_pg dashboard: live counts and confirmations. No framework, no build step.
// Live data comes from /api/stream (server-sent events); if the stream fails, the page
// polls /api/overview instead. Elements opt in with data-live="queue:state",
// data-live="total:state", data-live="workers" and data-live-paused="queue".
(function () {
  "use strict";
  var base = document.body.getAttribute("data-base") || "";
  var indicator = document.getElementById("live");
  var pollTimer = null;

  function setText(selector, value) {
    document.querySelectorAll(selector).forEach(function (el) {
      var text = String(value);
      if (el.textContent !== text) {
        el.textContent = text;
        el.classList.add("changed");
        setTimeout(function () { el.classList.remove("changed"); }, 800);
      }
    });
  }

  function apply(snapshot) {
    Object.keys(snapshot.queues || {}).forEach(function (queue) {
      var q = snapshot.queues[queue];
      Object.keys(q.counts).forEach(function (state) {
        setText('[data-live="' + CSS.escape(queue + ":" + state) + '"]', q.counts[state]);
      });
      setText('[data-live="' + CSS.escape(queue + ":workers") + '"]', q.workers);
      document.querySelectorAll('[data-live-paused="' + CSS.escape(queue) + '"]').forEach(function (el) {
        el.hidden = !q.paused;
      });
    });
    Object.keys(snapshot.totals || {}).forEach(function (state) {
      setText('[data-live="' + CSS.escape("total:" + state) + '"]', snapshot.totals[state]);
    });
    setText('[data-live="workers"]', snapshot.workers);
    document.body.setAttribute("data-live-updates", String(Number(document.body.getAttribute("data-live-updates") || 0) + 1));
  }

  function poll() {
    if (pollTimer) return;
    if (indicator) { indicator.className = "live polling"; indicator.title = "polling"; }
    pollTimer = setInterval(function () {
      fetch(base + "/api/overview", { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (s) { if (s) apply(s); })
        .catch(function () {});
    }, 5000);
  }

  function stream() {
    if (!window.EventSource || !document.querySelector("[data-live], [data-live-paused]")) {
      return;
    }
    var source = new EventSource(base + "/api/stream");
    var failures = 0;
    source.addEventListener("overview", function (e) {
      failures = 0;
      if (indicator) { indicator.className = "live on"; indicator.title = "live"; }
      apply(JSON.parse(e.data));
    });
    source.onerror = function () {
      failures += 1;
      if (indicator) indicator.className = "live off";
      if (failures >= 3) { source.close(); poll(); }
    };
  }

  // Ask before a destructive or bulk action (the server also requires the checkbox of a
  // bulk action, so a form posted without this script is refused, not run).
  document.addEventListener("submit", function (e) {
    var form = e.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) e.preventDefault();
  });

  stream();
})();
