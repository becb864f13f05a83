// The console's page code (no inline script: the Content-Security-Policy forbids it).
// - countdowns: every <time data-due> shows "in 4m 10s" / "due now", every <time data-since> "3m ago";
// - the message box: Enter sends, Shift+Enter is a new line;
// - live events: an event already on the page (a reconnected stream sends it again) is not added twice,
//   and the list scrolls to the newest (the panels re-sent whole, transcript and schedules, are swapped as they come).
(function () {
  'use strict';

  function human(totalSeconds) {
    var s = Math.round(totalSeconds);
    if (s < 60) return s + 's';
    var d = Math.floor(s / 86400),
      h = Math.floor((s % 86400) / 3600),
      m = Math.floor((s % 3600) / 60),
      r = s % 60;
    if (d > 0) return d + 'd' + (h ? ' ' + h + 'h' : '');
    if (h > 0) return h + 'h' + (m ? ' ' + m + 'm' : '');
    return m + 'm' + (r ? ' ' + r + 's' : '');
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll('time[data-due]').forEach(function (el) {
      var s = (Number(el.getAttribute('data-due')) - now) / 1000;
      el.textContent = s > 0.5 ? 'in ' + human(s) : s > -2 ? 'due now' : human(-s) + ' ago';
    });
    document.querySelectorAll('time[data-since]').forEach(function (el) {
      el.textContent = human((now - Number(el.getAttribute('data-since'))) / 1000) + ' ago';
    });
  }
  setInterval(tick, 1000);

  document.addEventListener('keydown', function (e) {
    var t = e.target;
    if (e.key !== 'Enter' || e.shiftKey || e.isComposing || !t || t.tagName !== 'TEXTAREA' || !t.form || t.form.id !== 'send') return;
    e.preventDefault();
    if (t.value.trim() !== '') t.form.requestSubmit();
  });

  document.addEventListener('htmx:sseBeforeMessage', function (e) {
    if (!e.target || e.target.id !== 'events') return;
    var m = /data-id="([^"]+)"/.exec(e.detail && typeof e.detail.data === 'string' ? e.detail.data : '');
    if (m && document.querySelector('[data-id="' + CSS.escape(m[1]) + '"]')) e.preventDefault();
  });
  document.addEventListener('htmx:sseMessage', function (e) {
    if (e.target && e.target.id === 'events' && e.target.lastElementChild) e.target.lastElementChild.scrollIntoView({ block: 'nearest' });
  });
  document.addEventListener('htmx:afterSwap', function (e) {
    if (e.target && e.target.id === 'send') {
      var box = document.querySelector('#send textarea');
      if (box) box.focus();
    }
  });
})();
