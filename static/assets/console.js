// idemgate console enhancements. Pages work without this file; it only adds what plain HTML
// cannot do: forms sent once, and the review queue's refresh. Served from /static under the
// console's Content-Security-Policy (script-src 'self'), so it must stay an external file: no
// inline script, no eval.
//
// Review queue: the list marked data-auto-refresh reloads itself in place every
// data-refresh-ms milliseconds (15 seconds unless the server says otherwise) from the URL in
// that attribute (the same list alone, with the same filters). It never
// replaces the list while a field inside it has focus or holds typed text, so a half-typed
// reason is never lost; and it stops, saying so, when the session has ended (the answer
// was a redirect to the sign-in page) or the server refuses.
(function () {
  "use strict";

  document.documentElement.classList.add("js");

  // On a phone, what is marked data-fold-on-phone (the review queue's filters and tools) starts
  // folded, so that the list is on the first screen; it opens with one tap.
  if (window.matchMedia && window.matchMedia("(max-width: 40rem)").matches) {
    document.querySelectorAll("details[data-fold-on-phone]").forEach(function (d) {
      d.open = false;
    });
  }

  // On a phone the sections scroll sideways in one row (app.css): the current one is shown.
  var nav = document.querySelector('[data-testid="main-nav"]');
  var here = nav ? nav.querySelector('[aria-current="page"]') : null;
  if (here && nav.scrollWidth > nav.clientWidth) {
    var beyond = here.getBoundingClientRect().right - nav.getBoundingClientRect().right;
    if (beyond > 0) {
      nav.scrollLeft += beyond + 8;
    }
  }

  // Times in the browser's zone, for a person who chose it (data-times="local", rendered by the
  // server from their preference): every <time datetime> is rewritten in the same format as the
  // UTC one, milliseconds kept where it had them, the zone named after it. The UTC time stays
  // in the element's title.
  function pad(n, w) {
    var s = String(n);
    while (s.length < (w || 2)) {
      s = "0" + s;
    }
    return s;
  }
  function localTimes(root) {
    if (document.documentElement.getAttribute("data-times") !== "local") {
      return;
    }
    var zone = "";
    try {
      var parts = new Intl.DateTimeFormat("en", { timeZoneName: "short" }).formatToParts(new Date());
      for (var k = 0; k < parts.length; k++) {
        if (parts[k].type === "timeZoneName") {
          zone = parts[k].value;
        }
      }
    } catch (e) {
      zone = "local";
    }
    var times = root.querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) {
      var el = times[i];
      var text = el.textContent;
      if (el.getAttribute("data-local") === "1" || !/\d{4}-\d{2}-\d{2} \d{2}:\d{2}/.test(text)) {
        continue; // already rewritten, or not a clock time (an age, a date alone)
      }
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime())) {
        continue;
      }
      var s = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
        pad(d.getHours()) + ":" + pad(d.getMinutes());
      if (/\d{2}:\d{2}:\d{2}/.test(text)) {
        s += ":" + pad(d.getSeconds()); // a list row's time is to the minute, and stays so
      }
      if (/:\d{2}\.\d{3}/.test(text)) {
        s += "." + pad(d.getMilliseconds(), 3);
      }
      if (!el.getAttribute("title")) {
        el.setAttribute("title", text);
      }
      el.textContent = s + " " + zone;
      el.setAttribute("data-local", "1");
    }
  }
  localTimes(document); // and the queue's refreshed list, below

  // Forms marked data-submit-once (the review actions) are sent once: a double click would
  // otherwise post the action twice, and the page would show the refusal of the second post
  // instead of the outcome of the first. A page restored from the back/forward cache can send
  // again.
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!form.hasAttribute || !form.hasAttribute("data-submit-once")) {
      return;
    }
    if (form.getAttribute("data-submitting") === "1") {
      ev.preventDefault();
      return;
    }
    form.setAttribute("data-submitting", "1");
    var buttons = form.querySelectorAll('button[type="submit"]');
    for (var i = 0; i < buttons.length; i++) {
      buttons[i].setAttribute("aria-disabled", "true");
    }
  });
  window.addEventListener("pageshow", function (ev) {
    if (!ev.persisted) {
      return;
    }
    var forms = document.querySelectorAll("form[data-submitting]");
    for (var i = 0; i < forms.length; i++) {
      forms[i].removeAttribute("data-submitting");
      var buttons = forms[i].querySelectorAll('button[aria-disabled="true"]');
      for (var j = 0; j < buttons.length; j++) {
        buttons[j].removeAttribute("aria-disabled");
      }
    }
  });

  // A long agent's reason shows its first lines and a toggle to show it all (app.css); where
  // it fits those lines anyway, the toggle goes.
  function reasonFits(root) {
    var figs = root.querySelectorAll(".operation-reason--long");
    for (var i = 0; i < figs.length; i++) {
      var text = figs[i].querySelector(".operation-reason__text");
      var all = figs[i].querySelector(".operation-reason__all");
      if (text && !(all && all.checked)) {
        figs[i].classList.toggle("operation-reason--fits", text.scrollHeight <= text.clientHeight + 1);
      }
    }
  }
  reasonFits(document);
  window.addEventListener("resize", function () {
    reasonFits(document);
  });

  // A decision opened (a click on its summary, or its key) is brought into view, its submit
  // button included, scrolling no more than that takes.
  function bringIntoView(action) {
    if (!action.scrollIntoView) {
      return;
    }
    action.scrollIntoView({ block: "nearest" });
    var submit = action.querySelector('button[type="submit"]');
    if (submit) {
      submit.scrollIntoView({ block: "nearest" });
    }
  }
  document.addEventListener("click", function (ev) {
    var summary = ev.target && ev.target.closest ? ev.target.closest("details.action > summary") : null;
    if (!summary) {
      return;
    }
    var action = summary.parentNode;
    window.setTimeout(function () {
      if (action.open) {
        bringIntoView(action);
      }
    }, 0);
  });

  // Copy buttons (data-copy names the element whose text they copy): the clipboard API where
  // the page is a secure context, else a selection and execCommand. The button says it worked.
  document.addEventListener("click", function (ev) {
    var button = ev.target.closest ? ev.target.closest("[data-copy]") : null;
    if (!button) {
      return;
    }
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) {
      return;
    }
    var text = source.textContent.trim();
    var label = button.textContent;
    function done() {
      button.textContent = "Copied";
      button.setAttribute("data-copied", "1");
      window.setTimeout(function () {
        button.textContent = label;
        button.removeAttribute("data-copied");
      }, 2000);
    }
    function fallback() {
      var range = document.createRange();
      range.selectNodeContents(source);
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      try {
        document.execCommand("copy");
      } catch (e) {
        /* the text stays selected for the person to copy */
      }
      done();
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else {
      fallback();
    }
  });

  // Keyboard (issue 19): "?" shows the shortcuts; in the review queue j and k move between
  // reviews and Enter opens the one marked; on an operation's page a letter opens a decision's
  // form at its reason, which must still be written: no key decides anything by itself. Keys
  // typed into a field, or with a modifier, are left alone.
  var DECISIONS = {
    s: "confirm_succeeded", n: "confirm_not_executed", f: "mark_failed", l: "reconcile_now",
    a: "approve", x: "reject", p: "propose_compensation"
  };
  var marked = null; // the review id marked in the queue, kept across its refreshes

  // After a decision, the way on is the next review: focus its link, so Enter follows it.
  var nextReview = document.querySelector('[data-testid="next-review"] a');
  if (nextReview) {
    nextReview.focus();
  }

  function rows() {
    return document.querySelectorAll('[data-testid="review-row"]');
  }
  function mark(delta) {
    var list = rows();
    if (list.length === 0) {
      return;
    }
    var at = -1;
    for (var i = 0; i < list.length; i++) {
      if (list[i].getAttribute("data-review-id") === marked) {
        at = i;
      }
    }
    at = at < 0 ? 0 : Math.min(list.length - 1, Math.max(0, at + delta));
    for (var j = 0; j < list.length; j++) {
      list[j].classList.toggle("is-marked", j === at);
      list[j].removeAttribute("aria-current");
    }
    list[at].setAttribute("aria-current", "true");
    marked = list[at].getAttribute("data-review-id");
    list[at].scrollIntoView({ block: "nearest" });
  }
  function open(name) {
    var action = document.querySelector('details[data-action="' + name + '"]');
    if (!action) {
      return false;
    }
    action.open = true;
    bringIntoView(action);
    var reason = action.querySelector("textarea, input[type=text]");
    if (reason) {
      reason.focus({ preventScroll: true });
    }
    return true;
  }
  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.defaultPrevented) {
      return;
    }
    var t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) {
      return;
    }
    var help = document.getElementById("shortcuts");
    if (ev.key === "?" && help && help.showModal) {
      ev.preventDefault();
      if (help.open) {
        help.close();
      } else {
        help.showModal();
      }
      return;
    }
    // g goes to the review queue from any page that has it in its menu.
    var queue = document.querySelector('[data-testid="nav-reviews"]');
    if (ev.key === "g" && queue && rows().length === 0) {
      ev.preventDefault();
      window.location.assign(queue.getAttribute("href"));
      return;
    }
    if (rows().length > 0) {
      // t ticks (or unticks) the marked review for a decision on many.
      if (ev.key === "t" && marked) {
        var pick = document.querySelector('[data-review-id="' + marked + '"] [data-testid="bulk-pick"]');
        if (pick) {
          ev.preventDefault();
          pick.click();
        }
        return;
      }
      if (ev.key === "j" || ev.key === "k") {
        ev.preventDefault();
        mark(ev.key === "j" ? 1 : -1);
        return;
      }
      if (ev.key === "Enter" && marked) {
        var link = document.querySelector('[data-review-id="' + marked + '"] [data-testid="review-operation-link"]');
        if (link) {
          ev.preventDefault();
          window.location.assign(link.getAttribute("href"));
        }
        return;
      }
    }
    if (Object.prototype.hasOwnProperty.call(DECISIONS, ev.key) && open(DECISIONS[ev.key])) {
      ev.preventDefault();
    }
  });
  // The queue's refresh swaps the list: mark the same review again.
  new MutationObserver(function () {
    if (marked && document.querySelector('[data-review-id="' + marked + '"]:not(.is-marked)')) {
      mark(0);
    }
  }).observe(document.body, { childList: true, subtree: true });

  // edited reports whether someone is working inside el: a focused field, or a field whose
  // value differs from what the server sent. The queue's refresh and the operation page's live
  // update both leave such a part as it is.
  function edited(el) {
    if (el.contains(document.activeElement) && document.activeElement !== el) {
      return true;
    }
    var fields = el.querySelectorAll("input, textarea, select");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === "hidden" || f.type === "submit" || f.type === "button") {
        continue;
      }
      if (f.tagName === "SELECT") {
        for (var j = 0; j < f.options.length; j++) {
          if (f.options[j].selected !== f.options[j].defaultSelected) {
            return true;
          }
        }
      } else if (f.type === "checkbox" || f.type === "radio") {
        if (f.checked !== f.defaultChecked) {
          return true;
        }
      } else if (f.value !== f.defaultValue) {
        return true;
      }
    }
    return false;
  }

  // Live operation page (issue 19): every few seconds the page asks whether its operation
  // changed (data-live-src answers its version). When it did, the page fetches itself and
  // swaps its parts (data-live-part) in place: the state, the situation, the record. The
  // decision forms are swapped too unless the person has started one (typed, ticked, or is in
  // it): then that part stays as it is, and a notice says the page changed around it. The kept
  // forms are marked stale where the person is looking, their buttons disabled and the change
  // stated beside them (the server would refuse a decision made on what the page showed
  // before); the typed text stays to copy, and one button shows the current choices.
  var live = document.querySelector("[data-live-src]");
  if (live && window.fetch && window.DOMParser) {
    var liveGet = function (url, accept) {
      return window.fetch(url, {
        credentials: "same-origin",
        redirect: "manual",
        headers: { Accept: accept, "X-Idemgate-Background": "1" }
      }).then(function (res) {
        return res.type === "opaqueredirect" || !res.ok ? null : res.text(); // signed out, or gone
      });
    };
    // A part is started when the person is working in it (edited) or opened a form to decide.
    var started = function (part) {
      return edited(part) || part.querySelector("details[open]") !== null;
    };
    var tell = function (kept) {
      var note = document.querySelector('[data-testid="live-changed"]');
      if (!note) {
        note = document.createElement("p");
        note.setAttribute("role", "status");
        note.setAttribute("data-testid", "live-changed");
        var first = document.querySelector("[data-live-part]");
        first.parentNode.insertBefore(note, first);
      }
      note.textContent = kept
        ? "This operation changed while you were deciding: the page shows it as it is now. Your unsent decision is kept as you typed it, but it can no longer be sent: see the note beside it."
        : live.getAttribute("data-live-note") || "This operation changed: the page shows it as it is now.";
      note.className = kept ? "notice notice--warning" : "notice";
      note.setAttribute("data-kept", kept ? "true" : "false");
    };
    // stale marks every form of a kept part as decided on an older page, saying what changed.
    var stale = function (part, fresh, next) {
      var badge = next.querySelector('[data-testid="operation"] [data-state]');
      var attempts = next.querySelector('[data-testid="operation-attempts"]');
      var now = "Changed meanwhile: the operation is now " + (badge ? badge.getAttribute("data-state") : "different") +
        (attempts ? ", after " + attempts.textContent.trim() + " attempt(s)" : "") +
        ". This decision was started on the page as it was before, so it cannot be sent; what you typed stays here to copy.";
      part.querySelectorAll("form").forEach(function (form) {
        form.setAttribute("data-stale", "true");
        form.querySelectorAll('button[type="submit"], input[type="submit"]').forEach(function (b) {
          b.disabled = true;
          b.setAttribute("aria-disabled", "true");
        });
        var note = form.querySelector('[data-testid="stale-form"]');
        if (!note) {
          note = document.createElement("p");
          note.className = "action__stale";
          note.setAttribute("role", "status");
          note.setAttribute("data-testid", "stale-form");
          form.insertBefore(note, form.firstChild);
          var again = document.createElement("button");
          again.type = "button";
          again.className = "button button--small";
          again.setAttribute("data-testid", "stale-refresh");
          again.textContent = "Show the current choices";
          again.addEventListener("click", function () {
            var current = document.querySelector('[data-live-part="' + part.getAttribute("data-live-part") + '"]');
            var latest = document.importNode(fresh, true);
            current.replaceWith(latest);
          });
          note.after(again);
        }
        note.textContent = now;
      });
    };
    var swap = function (html, version) {
      var next = new DOMParser().parseFromString(html, "text/html");
      var nextLive = next.querySelector("[data-live-src]");
      if (!nextLive) {
        return false;
      }
      var kept = false;
      document.querySelectorAll("[data-live-part]").forEach(function (part) {
        var fresh = next.querySelector('[data-live-part="' + part.getAttribute("data-live-part") + '"]');
        if (!fresh) {
          return;
        }
        if (part.hasAttribute("data-live-keep-started") && started(part)) {
          kept = true;
          stale(part, fresh, next);
          return;
        }
        // A reason the person unfolded stays unfolded.
        var all = part.querySelector(".operation-reason__all");
        var freshAll = fresh.querySelector(".operation-reason__all");
        if (all && freshAll && all.checked) {
          freshAll.setAttribute("checked", "");
        }
        part.replaceWith(document.importNode(fresh, true));
      });
      reasonFits(document);
      live = document.querySelector("[data-live-src]");
      live.setAttribute("data-live-version", nextLive.getAttribute("data-live-version") || version);
      document.title = next.title || document.title;
      localTimes(document);
      tell(kept);
      return true;
    };
    var LIVE_MS = parseInt(live.getAttribute("data-live-ms") || "3000", 10);
    var check = function () {
      if (!live.hasAttribute("data-live-src")) {
        return; // switched off (a tab the tests keep stale on purpose)
      }
      var seen = live.getAttribute("data-live-version");
      liveGet(live.getAttribute("data-live-src"), "text/plain")
        .then(function (version) {
          if (version === null) {
            return "stop";
          }
          if (version.trim() === seen) {
            return "same";
          }
          return liveGet(window.location.pathname, "text/html").then(function (html) {
            return html !== null && swap(html, version.trim()) ? "swapped" : "stop";
          });
        })
        .then(function (outcome) {
          if (outcome !== "stop") {
            window.setTimeout(check, LIVE_MS);
          }
        })
        .catch(function () {
          window.setTimeout(check, LIVE_MS);
        });
    };
    window.setTimeout(check, LIVE_MS);
  }

  // The review queue's refresh (below) ends this script early on pages without a queue: what
  // every page needs stays above it.
  var SELECTOR = "[data-auto-refresh]";
  var timer = null;

  var first = document.querySelector(SELECTOR);
  if (!first || !window.fetch || !window.DOMParser) {
    return;
  }
  var EVERY_MS = parseInt(first.getAttribute("data-refresh-ms"), 10) || 15000;

  function schedule() {
    timer = window.setTimeout(refresh, EVERY_MS);
  }

  function stop(message) {
    window.clearTimeout(timer);
    var list = document.querySelector(SELECTOR);
    if (!list) {
      return;
    }
    var note = document.createElement("p");
    note.className = "notice notice--warning";
    note.setAttribute("role", "status");
    note.setAttribute("data-testid", "refresh-stopped");
    note.textContent = message;
    list.insertBefore(note, list.firstChild);
  }

  function refresh() {
    var list = document.querySelector(SELECTOR);
    if (!list) {
      return;
    }
    if (document.hidden || edited(list)) {
      schedule();
      return;
    }
    window
      .fetch(list.getAttribute("data-auto-refresh"), {
        credentials: "same-origin",
        headers: { Accept: "text/html", "X-Idemgate-Background": "1" },
      })
      .then(function (res) {
        if (res.redirected) {
          stop("Your session has ended, so this list no longer refreshes. Reload the page to sign in again.");
          return null;
        }
        if (!res.ok) {
          stop("This list could not be refreshed (HTTP " + res.status + "). Reload the page to try again.");
          return null;
        }
        return res.text();
      })
      .then(function (html) {
        if (html === null) {
          return;
        }
        var current = document.querySelector(SELECTOR);
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector(SELECTOR);
        // Check again: someone may have started typing while the request was out.
        if (current && fresh && !edited(current)) {
          var node = document.importNode(fresh, true);
          localTimes(node);
          current.replaceWith(node);
          // The bulk bar's "all matching" counts what the list now holds ("all" is read
          // again when the bar is sent, so the label is what it will take).
          var all = document.querySelector('[data-testid="bulk-all-label"]');
          if (all && node.getAttribute("data-bulk-all")) {
            all.textContent = node.getAttribute("data-bulk-all");
          }
        }
        schedule();
      })
      .catch(function () {
        schedule(); // a network blip: try again at the next tick
      });
  }

  schedule();
})();
