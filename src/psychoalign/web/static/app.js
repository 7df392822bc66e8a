// Progressive enhancement only: every page works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // One click, one submission: disable the submit button of a form while it is being sent.
  document.querySelectorAll("form").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      // a disabled button is left out of the form data: carry the pressed one's name (submit & next)
      var pressed = event.submitter;
      if (pressed && pressed.name) {
        var carry = document.createElement("input");
        carry.type = "hidden"; carry.name = pressed.name; carry.value = pressed.value;
        form.appendChild(carry);
      }
      form.dataset.submitting = "1";
      form.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = true; });
      // a slow answer (a model, a negotiation): say so instead of a page that seems stuck
      form.querySelectorAll(".wait-note").forEach(function (note) { note.hidden = false; });
    });
  });
  // Character counters: the count as you type; over the limit the browser refuses to send and says
  // by how much (the server refuses too, and keeps the text as a draft): never a silent cut. Counted
  // as the server counts: characters (an emoji is one, not two UTF-16 units) of the trimmed text.
  document.querySelectorAll("textarea[data-max]").forEach(function (box) {
    var max = parseInt(box.getAttribute("data-max"), 10);
    var counter = document.getElementById(box.getAttribute("aria-describedby"));
    function update() {
      var n = Array.from(box.value.trim()).length;
      if (counter) {
        counter.querySelector(".count").textContent = n.toLocaleString("en");
        counter.classList.toggle("over", n > max);
      }
      box.setCustomValidity(n > max ? "Too long: " + n.toLocaleString("en") + " characters; the limit is " +
        max.toLocaleString("en") + ". Shorten it by " + (n - max).toLocaleString("en") + " characters." : "");
    }
    box.addEventListener("input", update);
    update();
  });
  // Drafts: what is typed on a task page is saved on the server as it is typed, so a reload, a
  // crash or an ended session loses nothing (the page shows the saved draft when it opens again).
  document.querySelectorAll("form[data-draft-url]").forEach(function (form) {
    var status = form.querySelector(".draft-status");
    var timer = null;
    function say(text) { if (status) { status.textContent = text; } }
    function save() {
      timer = null;
      if (form.dataset.submitting) { return; }
      var data = new FormData();
      data.append("csrf_token", form.querySelector("input[name=csrf_token]").value);
      var rating = form.querySelector("input[name=rating]:checked");
      data.append("rating", rating ? rating.value : "0");
      data.append("text", form.querySelector("[data-draft=text]").value);
      fetch(form.getAttribute("data-draft-url"), {
        method: "POST", body: data, credentials: "same-origin", redirect: "manual",
        headers: { "Accept": "application/json" }
      }).then(function (r) {
        if (r.type === "opaqueredirect" || r.status === 303) {
          say("Not saved: you are logged out. Log in again in another tab; the draft saved before stays.");
          return null;
        }
        return r.ok ? r.json() : null;
      }).then(function (saved) {
        if (saved) { say("Draft saved " + new Date(saved.saved_at).toLocaleTimeString() + "."); }
      }).catch(function () { say("Not saved: the server cannot be reached. Keep this page open."); });
    }
    function later() {
      if (timer) { clearTimeout(timer); }
      say("Saving…");
      timer = setTimeout(save, 600);
    }
    form.addEventListener("input", later);
    // a text box's change (on blur) repeats its inputs: only a rating's change is news
    form.addEventListener("change", function (event) { if (event.target.type === "radio") { later(); } });
  });
  // Keys on task pages: 1–n pick the rating (outside text boxes), Ctrl/⌘+Enter submits (on a
  // rating page: submit & next).
  var ratingForm = document.getElementById("rating-form");
  document.addEventListener("keydown", function (event) {
    var form = event.target.closest ? event.target.closest("form[data-draft-url]") : null;
    if ((event.ctrlKey || event.metaKey) && event.key === "Enter") {
      form = form || ratingForm;
      if (!form) { return; }
      event.preventDefault();
      var next = form.querySelector("button[name=next]") || form.querySelector("button[type=submit]");
      form.requestSubmit(next);
      return;
    }
    if (!ratingForm || event.ctrlKey || event.metaKey || event.altKey) { return; }
    var tag = event.target.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT" || event.target.isContentEditable ||
        (tag === "INPUT" && !/^(radio|checkbox|button|submit)$/.test(event.target.type))) { return; }
    var radio = ratingForm.querySelector("input[name=rating][value='" + event.key + "']");
    if (radio && /^[0-9]$/.test(event.key)) {
      event.preventDefault();
      radio.checked = true;
      radio.dispatchEvent(new Event("change", { bubbles: true }));
    }
  });
  // Red teaming: keep the newest message in view (annotators read a dialogue from its start).
  document.querySelectorAll(".chat.follow").forEach(function (chat) { chat.scrollTop = chat.scrollHeight; });
  // Time on task: count on from the server's figure, every minute while the page is visible, and
  // suggest a break once it passes the lab's threshold (the server already shows the prompt when
  // the stored time passed it). "Not now" snoozes it for another threshold's worth of time.
  var clock = document.getElementById("time-on-task");
  if (clock) {
    var base = parseInt(clock.getAttribute("data-seconds"), 10) || 0;
    var breakAfter = parseInt(clock.getAttribute("data-break-seconds"), 10) || 0;
    var opened = Date.now();
    var prompt = document.getElementById("break-prompt");
    var dismiss = document.getElementById("break-dismiss");
    var snoozeKey = "psa-break-" + clock.getAttribute("data-task");
    var snoozed = 0;
    try { snoozed = parseInt(sessionStorage.getItem(snoozeKey) || "0", 10) || 0; } catch (e) { /* no storage */ }
    var spent = function () { return base + Math.floor((Date.now() - opened) / 1000); };
    var tick = function () {
      var s = spent();
      clock.querySelector(".minutes").textContent = String(Math.floor(s / 60));
      if (prompt && breakAfter > 0) { prompt.hidden = !(s >= breakAfter && s >= snoozed); }
    };
    if (prompt && dismiss) {
      dismiss.hidden = false;
      dismiss.addEventListener("click", function () {
        snoozed = spent() + breakAfter;
        try { sessionStorage.setItem(snoozeKey, String(snoozed)); } catch (e) { /* this page only */ }
        prompt.hidden = true;
      });
    }
    var ticker = null;
    var follow = function () {
      if (document.visibilityState === "visible") {
        tick();
        if (!ticker) { ticker = setInterval(tick, 60000); }
      } else if (ticker) {
        clearInterval(ticker);
        ticker = null;
      }
    };
    document.addEventListener("visibilitychange", follow);
    follow();
  }
  // The keys, counters and drafts above are live (a marker tests synchronise on, never a clock).
  document.documentElement.setAttribute("data-enhanced", "1");
  // A flash message (?msg=…) says what a form just did: drop it from the address, so a reload or a
  // bookmark does not say it again.
  if (window.history && window.history.replaceState && /[?&]msg=/.test(window.location.search)) {
    var params = new URLSearchParams(window.location.search);
    params.delete("msg");
    var query = params.toString();
    window.history.replaceState(window.history.state, "",
      window.location.pathname + (query ? "?" + query : "") + window.location.hash);
  }
  // Lead campaign page: the results panel follows new submissions without a reload. The server
  // answers "unchanged" to the version shown, and the panel's new HTML (its own template) otherwise.
  var results = document.querySelector("[data-results-url]");
  if (results) {
    setInterval(function () {
      var url = results.getAttribute("data-results-url") + "?since=" +
        encodeURIComponent(results.getAttribute("data-version") || "");
      fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (data) {
          if (!data || !data.changed) { return; }
          results.innerHTML = data.html;
          results.setAttribute("data-version", data.version);
        })
        .catch(function () { /* offline: keep the figures we have */ });
    }, 10000);
  }
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
