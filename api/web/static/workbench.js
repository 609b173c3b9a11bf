// The workbench's only script: keyboard moves, and the verdict the rule would give after
// an override, computed as the rule does (yes count and yes per dimension). It reads the
// page, never builds markup from it.
"use strict";
(function () {
  var verdict = document.getElementById("verdict");
  var questions = Array.prototype.slice.call(document.querySelectorAll(".question"));

  function ruleVerdict(flipId, flipTo) {
    if (!verdict || !verdict.dataset.minYes) return null;
    var minYes = Number(verdict.dataset.minYes);
    var perDim = Number(verdict.dataset.minYesPerDimension);
    var yes = 0;
    var dims = {};
    questions.forEach(function (q) {
      var answer = q.dataset.question === flipId ? flipTo : q.dataset.answer;
      var dim = q.dataset.dimension;
      if (!(dim in dims)) dims[dim] = 0;
      if (answer === "yes") { yes += 1; dims[dim] += 1; }
    });
    var passed = yes >= minYes && Object.keys(dims).every(function (d) { return dims[d] >= perDim; });
    return { passed: passed, yes: yes };
  }

  function describe(result) {
    var fixed = verdict.dataset.verdictOverride;
    var text = "rule: " + (result.passed ? "PASS" : "FAIL") + " (" + result.yes + " yes)";
    if (fixed) text += "; the verdict override keeps it " + fixed.toUpperCase();
    return text;
  }

  var current = ruleVerdict(null, null);
  var preview = document.querySelector("#verdict .preview");
  if (current && preview) preview.textContent = "Answers as they stand: " + describe(current);

  document.querySelectorAll("form.override[data-flip]").forEach(function (form) {
    var out = form.querySelector("output");
    var question = form.closest(".question");
    var answer = form.querySelector("input[name=answer]").value;
    var result = ruleVerdict(question.dataset.question, answer);
    if (out && result) out.textContent = "after this override: " + describe(result);
  });

  var focused = -1;
  function focusQuestion(i) {
    if (!questions.length) return;
    focused = Math.max(0, Math.min(questions.length - 1, i));
    questions[focused].focus();
    questions[focused].scrollIntoView({ block: "nearest" });
  }

  // a question the reader clicked (or tabbed into) is the one the keys act on
  questions.forEach(function (q, i) {
    q.addEventListener("focusin", function () { focused = i; });
  });

  // after an override the page comes back at #q-<id>: j/k go on from that question
  if (location.hash.indexOf("#q-") === 0) {
    questions.forEach(function (q, i) { if ("#" + q.id === location.hash) focused = i; });
  }

  // blind labelling: y/n answer the focused question and move on, enter saves
  var labels = document.querySelector("form.labels");
  function label(value) {
    if (focused < 0) focusQuestion(0);
    var radio = questions[focused].querySelector("input[value=" + value + "]");
    if (radio) radio.checked = true;
    focusQuestion(focused + 1);
  }
  // enter saves the labels when the focus is in the form or on the page itself; on a
  // link, a button or a summary it does what it does there (follows the link, presses)
  function savesLabels(target) {
    if (target.matches("a, button, summary, [role=button], [role=link]")) return false;
    return labels.contains(target) || target === document.body || target === document.documentElement;
  }

  // a regrade job's page: poll its progress (JSON) and write the numbers as text
  var progress = document.querySelector("[data-progress-url]");
  function poll() {
    fetch(progress.dataset.progressUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (job) {
        if (!job) return;
        progress.querySelectorAll("[data-field]").forEach(function (el) {
          var value = job[el.dataset.field];
          // a number's unit (data-unit) goes with it; an unknown one is a dash alone
          el.textContent = value === null || value === undefined ? "—" : String(value) + (el.dataset.unit || "");
        });
        var bar = progress.querySelector("progress");
        if (bar) { bar.max = job.total || 1; bar.value = job.done + job.failed + job.cancelled; }
        if (job.final) location.reload();  // the flip report is complete now
        else setTimeout(poll, 1000);
      });
  }
  if (progress && progress.dataset.final !== "true") setTimeout(poll, 1000);

  // canned reasons: ↓/↑ in a reason field put the next/previous canned reason in it (of
  // those holding what was typed before), alike in every browser, headless ones included
  var canned = document.getElementById("canned-reasons");
  function cycleReason(input, step) {
    var all = Array.prototype.map.call(canned.options, function (o) { return o.value; });
    if (input.dataset.typed === undefined || all.indexOf(input.value) < 0) input.dataset.typed = input.value;
    var typed = input.dataset.typed.toLowerCase();
    var choices = all.filter(function (r) { return r.toLowerCase().indexOf(typed) >= 0; });
    if (!choices.length) return;
    var at = choices.indexOf(input.value);
    at = at < 0 ? (step > 0 ? 0 : choices.length - 1) : (at + step + choices.length) % choices.length;
    input.value = choices[at];
  }

  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (canned && target.matches("input[list=canned-reasons]") && !event.altKey &&
        (event.key === "ArrowDown" || event.key === "ArrowUp")) {
      event.preventDefault();
      cycleReason(target, event.key === "ArrowDown" ? 1 : -1);
      return;
    }
    if (target.matches("input, textarea, select") || event.ctrlKey || event.metaKey || event.altKey) return;
    if (labels && (event.key === "y" || event.key === "n")) label(event.key === "y" ? "yes" : "no");
    else if (labels && event.key === "Enter" && savesLabels(target)) { event.preventDefault(); labels.requestSubmit(); }
    else if (event.key === "j") focusQuestion(focused + 1);
    else if (event.key === "k") focusQuestion(focused - 1);
    else if (event.key === "o" && focused >= 0) {
      var reason = questions[focused].querySelector("input[name=reason]");
      if (reason) { event.preventDefault(); reason.focus(); }
    } else if (event.key === "t") {
      var tag = document.querySelector("[data-testid=tag-select]");
      if (tag) { event.preventDefault(); tag.focus(); }
    } else if (event.key === "s") {
      var note = document.querySelector("[data-testid=skip-note-input]");
      if (note) { event.preventDefault(); note.focus(); }
    } else if (event.key === "n" || event.key === "b") {
      var link = document.querySelector("[data-key=" + event.key + "]");
      if (link) link.click();
    } else if (event.key === "?") {
      var help = document.getElementById("help");
      if (help) help.hidden = !help.hidden;
    }
  });
})();
