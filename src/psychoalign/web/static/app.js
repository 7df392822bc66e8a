// Progressive enhancement only: every page works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // One click, one submission: disable the submit button of a form while it is being sent.
  document.querySelectorAll("form").forEach(function (form) {
    form.addEventListener("submit", function () {
      form.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = true; });
      // a slow answer (a model, a negotiation): say so instead of a page that seems stuck
      form.querySelectorAll(".wait-note").forEach(function (note) { note.hidden = false; });
    });
  });
  // Red teaming: keep the newest message in view (annotators read a dialogue from its start).
  document.querySelectorAll(".chat.follow").forEach(function (chat) { chat.scrollTop = chat.scrollHeight; });
  // Lead progress pages: refresh the live numbers without reloading the page.
  var live = document.querySelector("[data-live-url]");
  if (live) {
    var url = live.getAttribute("data-live-url");
    setInterval(function () {
      fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (data) {
          if (!data) { return; }
          Object.keys(data.counts || {}).forEach(function (key) {
            var el = document.querySelector("[data-count='" + CSS.escape(key) + "']");
            if (el) { el.textContent = String(data.counts[key]); }
          });
        })
        .catch(function () { /* offline: keep the numbers we have */ });
    }, 10000);
  }
});
