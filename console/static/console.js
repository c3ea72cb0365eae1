// Live updates for Berth's console: follow /console/events (server-sent
// events from an etcd watch) and, on each change, fetch this page again
// and swap in its parts marked data-live. Without this script the pages
// are the same, only static. No framework, no build step.
(function () {
  "use strict";
  var rev = document.body.getAttribute("data-rev");
  var badge = document.getElementById("live");
  if (!rev || !window.EventSource || !window.fetch) {
    return;
  }
  var busy = false, again = false;
  function say(text, cls) {
    if (badge) {
      badge.textContent = text;
      badge.className = "live " + cls;
    }
  }
  function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) {
          throw new Error("HTTP " + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        doc.querySelectorAll("[data-live][id]").forEach(function (fresh) {
          var old = document.getElementById(fresh.id);
          if (old) {
            old.replaceWith(document.importNode(fresh, true));
          }
        });
        say("live", "on");
      })
      .catch(function () { say("live: refresh failed", "off"); })
      .then(function () {
        busy = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }
  var es = new EventSource("/console/events?from=" + encodeURIComponent(rev));
  es.addEventListener("change", refresh);
  es.onopen = function () { say("live", "on"); };
  es.onerror = function () {
    say(es.readyState === EventSource.CLOSED ? "live updates off: reload to retry" : "reconnecting", "off");
  };
})();
