// Docket's web UI: live updates (Server-Sent Events), type-ahead for references, and a guard against
// overwriting someone else's change. Plain JavaScript, no framework; the pages work without it.
(function () {
  'use strict';
  var body = document.body;
  var me = body.dataset.user || '';
  var notices = document.getElementById('notices');
  // A copy the service worker kept, shown because the network failed.
  var offlineAsOf = body.dataset.offlineAsOf;

  // Pages a signed-in user opens are kept for reading offline (sw.js); signed out, the kept ones are forgotten.
  if ('serviceWorker' in navigator && offlineAsOf === undefined) {
    if (me) {
      navigator.serviceWorker.register('/app/sw.js', { scope: '/app/' }).catch(function () {});
    } else if (window.caches) {
      caches.keys().then(function (names) {
        return Promise.all(names.filter(function (name) {
          return name.indexOf('docket-pages-') === 0 || name.indexOf('docket-viewer-') === 0;
        }).map(function (name) { return caches.delete(name); }));
      }).catch(function () {});
    }
  }
  // Comments typed on a kept page while offline wait in IndexedDB ('docket-outbox'), each with its own
  // Idempotency-Key, and are sent once the pages load from docketd again: once each, even when an answer is lost.
  var outbox = {
    open: function () {
      return new Promise(function (resolve, reject) {
        if (!window.indexedDB) return reject(new Error('no IndexedDB'));
        var request = indexedDB.open('docket-outbox', 1);
        request.onupgradeneeded = function () { request.result.createObjectStore('comments', { keyPath: 'key' }); };
        request.onsuccess = function () { resolve(request.result); };
        request.onerror = function () { reject(request.error); };
      });
    },
    run: function (mode, work) {
      return outbox.open().then(function (db) {
        return new Promise(function (resolve, reject) {
          var transaction = db.transaction('comments', mode);
          var result = work(transaction.objectStore('comments'));
          transaction.oncomplete = function () { db.close(); resolve(result && result.result); };
          transaction.onerror = function () { db.close(); reject(transaction.error); };
        });
      });
    },
    add: function (entry) { return outbox.run('readwrite', function (store) { store.put(entry); }); },
    all: function () { return outbox.run('readonly', function (store) { return store.getAll(); }); },
    remove: function (key) { return outbox.run('readwrite', function (store) { store.delete(key); }); }
  };
  function newKey() {
    var bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) { return ('0' + b.toString(16)).slice(-2); }).join('');
  }
  var flushing = false;
  function flushOutbox() {
    if (flushing || !me || offlineAsOf !== undefined) return;
    flushing = true;
    outbox.all().then(function (entries) {
      entries = (entries || []).filter(function (entry) { return entry.user === me; });
      return entries.reduce(function (previous, entry) {
        return previous.then(function (stop) {
          if (stop) return true;
          return fetch(entry.action, {
            method: 'POST', credentials: 'same-origin',
            headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'Idempotency-Key': entry.key },
            body: new URLSearchParams(entry.fields).toString()
          }).then(function (response) {
            if (response.ok) {
              notice('Sent the comment you wrote offline on ' + entry.title + '.');
              return outbox.remove(entry.key).then(function () { return false; });
            }
            notice('A comment written offline on ' + entry.title + ' was refused (' + response.status + '); it is kept.');
            return false;
          }, function () { return true; });  // Still no connection: the rest waits too.
        });
      }, Promise.resolve(false));
    }).catch(function () {}).then(function () { flushing = false; });
  }
  flushOutbox();
  window.addEventListener('online', flushOutbox);
  var commentForm = document.querySelector('form.comment');
  if (commentForm && offlineAsOf !== undefined && offlineAsOf !== 'none') {
    commentForm.addEventListener('submit', function (event) {
      event.preventDefault();
      var data = new FormData(commentForm, event.submitter);
      var fields = {};
      data.forEach(function (value, name) { fields[name] = String(value); });
      if (!fields.text || !fields.text.trim()) return;
      var title = (document.querySelector('main h1') || {}).textContent || 'this item';
      outbox.add({ key: newKey(), user: me, action: commentForm.action, fields: fields, title: title.trim(), queuedAt: new Date().toISOString() })
        .then(function () {
          commentForm.reset();
          var status = document.createElement('p');
          status.className = 'queued';
          status.setAttribute('role', 'status');
          status.textContent = 'Queued: your ' + (fields.element === 'work_notes' ? 'work note' : 'comment') +
            ' will be sent when the connection is back.';
          commentForm.appendChild(status);
        }, function (error) { notice('The comment could not be kept (' + error.message + ').'); });
    });
  }
  if (offlineAsOf !== undefined && offlineAsOf !== 'none') {
    var banner = document.createElement('div');
    banner.className = 'offline-banner';
    banner.setAttribute('role', 'status');
    var saved = new Date(offlineAsOf);
    var when = isNaN(saved.getTime()) ? 'an earlier visit' : saved.toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' });
    banner.textContent = 'Offline: this page as of ' + when + '. Comments you add are sent when the connection is back. ';
    var again = document.createElement('a');
    again.href = location.href;
    again.textContent = 'Try again';
    banner.appendChild(again);
    var main = document.querySelector('main') || body;
    main.insertBefore(banner, main.firstChild);
    body.dataset.liveState = 'offline';
  }

  // A notice stays 10 s (while the pointer or focus is not on it), or until its Dismiss button; the newest three show.
  function notice(text) {
    if (!notices) return;
    var item = document.createElement('div');
    item.className = 'notice';
    var words = document.createElement('span');
    words.textContent = text;
    var dismiss = document.createElement('button');
    dismiss.type = 'button';
    dismiss.textContent = 'Dismiss';
    dismiss.setAttribute('aria-label', 'Dismiss: ' + text);
    dismiss.addEventListener('click', function () { item.remove(); });
    item.appendChild(words);
    item.appendChild(dismiss);
    notices.appendChild(item);
    function later() {
      setTimeout(function () {
        if (item.matches(':hover') || item.contains(document.activeElement)) later(); else item.remove();
      }, 10000);
    }
    later();
    while (notices.children.length > 3) notices.firstChild.remove();
  }

  function label(field) {
    var text = String(field).replace(/_/g, ' ');
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  // Forms marked data-guard: once the user has typed, a live change is announced instead of applied.
  // Delegated: live refreshes replace forms, and the replacements must count too.
  var dirty = false;
  document.addEventListener('input', function (event) {
    if (event.target.closest && event.target.closest('form[data-guard]')) dirty = true;
  });
  document.addEventListener('submit', function (event) {
    if (event.target.matches && event.target.matches('form[data-guard]')) dirty = false;
  });

  // Type-ahead: fields with data-lookup fill their datalist from the server as the user types (delegated, so
  // that fields in refreshed forms work too).
  var lookupTimer = null;
  document.addEventListener('input', function (event) {
    var input = event.target;
    if (!input.matches || !input.matches('input[data-lookup]')) return;
    var list = document.getElementById(input.getAttribute('list'));
    clearTimeout(lookupTimer);
    var q = input.value.trim();
    if (!q || !list) return;
    lookupTimer = setTimeout(function () {
      fetch('/app/lookup/' + encodeURIComponent(input.dataset.lookup) + '?q=' + encodeURIComponent(q), {
        credentials: 'same-origin', headers: { Accept: 'application/json' }
      }).then(function (response) { return response.ok ? response.json() : []; })
        .then(function (items) {
          list.replaceChildren.apply(list, items.map(function (entry) {
            var option = document.createElement('option');
            option.value = entry.label;
            return option;
          }));
        }).catch(function () {});
    }, 150);
  });

  // Regions marked data-live-region are replaced by the same regions of a fresh copy of the page.
  var refreshing = null;
  function refresh() {
    if (refreshing) { refreshing.again = true; return; }
    refreshing = { again: false };
    fetch(location.href, { credentials: 'same-origin', headers: { Accept: 'text/html' } })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var fresh = new DOMParser().parseFromString(html, 'text/html');
        document.querySelectorAll('[data-live-region]').forEach(function (region) {
          var replacement = region.id && fresh.getElementById(region.id);
          if (replacement) region.replaceChildren.apply(region, Array.from(replacement.childNodes));
        });
        if (!dirty) {
          var edit = document.getElementById('edit');
          var freshEdit = fresh.getElementById('edit');
          if (edit && freshEdit) edit.replaceWith(freshEdit);
        }
      })
      .catch(function () {})
      .then(function () {
        var again = refreshing && refreshing.again;
        refreshing = null;
        if (again) refresh();
      });
  }

  // The bell: how many notifications are unread, from the live stream (its `ready` says, each new one adds one).
  var bell = document.querySelector('[data-unread]');
  var unread = 0;
  function setUnread(count) {
    unread = Math.max(0, count);
    if (!bell) return;
    bell.textContent = unread > 99 ? '99+' : String(unread);
    bell.hidden = unread === 0;
    bell.setAttribute('aria-label', unread + ' unread');
  }

  function onNotification(message) {
    setUnread(unread + 1);
    notice(message.subject || 'New notification');
    if (document.getElementById('inbox')) refresh();
  }

  function onChange(change) {
    if (change.table === 'sys_notification') {
      // The notifications page follows its own list: new ones, and ones marked read elsewhere.
      var before = (change.previous || {}).read;
      var after = (change.record || {}).read;
      if (change.change === 'entered') setUnread(unread + 1);
      else if (before === 'false' && after === 'true') setUnread(unread - 1);
      refresh();
      return;
    }
    var record = change.record || {};
    var previous = change.previous || {};
    var name = record.number || previous.number || change.sys_id;
    // People are named by their full names, as everywhere else on the page.
    var who = change.user_display || change.user;
    var by = change.user === me ? 'you' : who;
    var fields = (change.fields || []).filter(function (f) { return f.indexOf('sys_') !== 0; }).map(label);
    var item = body.dataset.liveItem;
    if (item) {
      if (change.sys_id !== item) return;
      if (change.change === 'deleted' || change.change === 'left') {
        notice(name + (change.change === 'deleted' ? ' was deleted by ' : ' is no longer visible to you after a change by ') + by);
        return;
      }
      if (dirty && change.user !== me) {
        var banner = document.getElementById('conflict');
        if (banner) {
          banner.textContent = who + ' changed this item while you were editing it' +
            (fields.length ? ' (' + fields.join(', ') + ')' : '') +
            '. If you save, your values replace theirs; reload the page to see their change first.';
          banner.hidden = false;
        }
      }
      refresh();
      if (change.user !== me) notice(name + ' changed by ' + by + (fields.length ? ': ' + fields.join(', ') : ''));
      return;
    }
    refresh();
    if (change.user === me) return;
    var verb = { entered: 'is new in your list', left: 'left your list', deleted: 'was deleted' }[change.change] || 'changed';
    notice(name + ' ' + verb + ' (' + by + ')');
  }

  // The live stream. It is closed whenever the page is hidden (pagehide: another page is opened, or this one goes
  // into the back/forward cache), so that no page left behind holds a connection: browsers allow six HTTP/1.1
  // connections per host, and streams of pages already left would otherwise use them up. When the page is shown
  // again it resumes after the last event it saw, so nothing is missed.
  var table = body.dataset.liveTable;
  var status = document.getElementById('live-status');
  var source = null;
  var lastEventId = null;
  var retryTimer = null;
  var stalledTimer = null;
  var failures = 0;

  function showStatus(text) {
    if (!status) return;
    status.textContent = text || '';
    status.hidden = !text;
  }

  function setState(state, text) {
    body.dataset.liveState = state;
    showStatus(text);
  }

  function disconnect() {
    clearTimeout(retryTimer);
    clearTimeout(stalledTimer);
    retryTimer = null;
    if (source) source.close();
    source = null;
  }

  // After a refusal (too many streams, a server restarting) EventSource gives up; try again with backoff.
  function retryLater() {
    disconnect();
    failures += 1;
    var seconds = Math.min(60, Math.pow(2, Math.min(failures, 6))) * (0.75 + Math.random() * 0.5);
    setState('retrying', 'Live updates stopped. Trying again in ' + Math.round(seconds) + ' s\u2026 ');
    if (status) {
      var now = document.createElement('button');
      now.type = 'button';
      now.textContent = 'Reconnect now';
      now.addEventListener('click', function () { connect(); });
      status.appendChild(now);
    }
    retryTimer = setTimeout(connect, seconds * 1000);
  }

  function remember(event) {
    if (event.lastEventId) lastEventId = event.lastEventId;
  }

  function connect() {
    disconnect();
    var url = '/app/events?table=' + encodeURIComponent(table) + '&query=' + encodeURIComponent(body.dataset.liveQuery || '') +
      (bell ? '&notifications=true' : '');
    if (lastEventId !== null) url += '&since=' + encodeURIComponent(lastEventId);
    var stream = new EventSource(url, { withCredentials: true });
    source = stream;
    if (body.dataset.liveState !== 'retrying') setState('connecting', '');
    stream.addEventListener('ready', function (event) {
      remember(event);
      try {
        var ready = JSON.parse(event.data);
        if (typeof ready.unread === 'number') setUnread(ready.unread);
      } catch (error) { /* an older server says nothing of notifications */ }
      failures = 0;
      clearTimeout(stalledTimer);
      setState('open', '');
    });
    stream.addEventListener('notification', function (event) {
      remember(event);
      try { onNotification(JSON.parse(event.data)); } catch (error) { /* a malformed message is skipped */ }
    });
    stream.addEventListener('message', function (event) {
      remember(event);
      try { onChange(JSON.parse(event.data)); } catch (error) { /* a malformed message is skipped */ }
    });
    // The log no longer reaches back to where the stream would resume: read the page again.
    stream.addEventListener('resync', function () { disconnect(); location.reload(); });
    stream.addEventListener('revoked', function () {
      disconnect();
      setState('closed', 'Your session has ended; sign in again to see live changes.');
    });
    stream.addEventListener('error', function () {
      if (stream !== source) return;
      if (stream.readyState === EventSource.CLOSED) { retryLater(); return; }
      // EventSource reconnects by itself (sending Last-Event-ID); say so if it takes a while.
      body.dataset.liveState = 'reconnecting';
      clearTimeout(stalledTimer);
      stalledTimer = setTimeout(function () {
        if (stream === source && body.dataset.liveState === 'reconnecting') {
          showStatus('Live updates interrupted; reconnecting\u2026');
        }
      }, 4000);
    });
  }

  // Push to this device (the notifications page): a service worker shows pushed notifications while no page is
  // open; the browser subscribes with docketd's VAPID key and the subscription is registered with docketd.
  var push = document.getElementById('push');
  function base64ToBytes(text) {
    var padded = (text + '===='.slice((text.length + 3) % 4)).replace(/-/g, '+').replace(/_/g, '/');
    var raw = atob(padded);
    var bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i += 1) bytes[i] = raw.charCodeAt(i);
    return bytes;
  }
  function postJSON(url, value) {
    return fetch(url, {
      method: 'POST', credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-CSRF-Token': push.dataset.csrf },
      body: JSON.stringify(value)
    }).then(function (response) {
      if (!response.ok) throw new Error('docketd answered ' + response.status);
      return response.json();
    });
  }
  if (push && 'serviceWorker' in navigator && 'PushManager' in window && window.Notification) {
    var pushState = document.getElementById('push-state');
    var enable = document.getElementById('push-enable');
    var disable = document.getElementById('push-disable');
    var registration = null;
    function showPush(subscribed, text) {
      push.hidden = false;
      pushState.textContent = text;
      enable.hidden = subscribed;
      disable.hidden = !subscribed;
    }
    function deviceName() {
      var agent = navigator.userAgent;
      var browser = /Edg\//.test(agent) ? 'Edge' : /Firefox\//.test(agent) ? 'Firefox' : /Chrome\//.test(agent) ? 'Chrome' : /Safari\//.test(agent) ? 'Safari' : 'Browser';
      var system = /Android/.test(agent) ? 'Android' : /iPhone|iPad/.test(agent) ? 'iOS' : /Mac OS X/.test(agent) ? 'macOS' : /Windows/.test(agent) ? 'Windows' : /Linux/.test(agent) ? 'Linux' : '';
      return browser + (system ? ' on ' + system : '');
    }
    navigator.serviceWorker.register('/app/sw.js', { scope: '/app/' }).then(function (found) {
      registration = found;
      return found.pushManager.getSubscription();
    }).then(function (subscription) {
      if (Notification.permission === 'denied') showPush(false, 'This browser blocks notifications from Docket; allow them in its site settings to be told here.');
      else if (subscription) showPush(true, 'Notifications are on for this device.');
      else showPush(false, 'Get notifications on this device, also when Docket is closed.');
    }).catch(function () { push.hidden = true; });
    enable.addEventListener('click', function () {
      enable.disabled = true;
      Notification.requestPermission().then(function (permission) {
        if (permission !== 'granted') throw new Error('permission');
        return fetch('/app/push/vapid', { credentials: 'same-origin', headers: { Accept: 'application/json' } });
      }).then(function (response) { return response.json(); })
        .then(function (key) {
          return registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: base64ToBytes(key.public_key) });
        }).then(function (subscription) {
          var value = subscription.toJSON();
          value.name = deviceName();
          return postJSON('/app/push/subscriptions', value);
        }).then(function () { showPush(true, 'Notifications are on for this device.'); })
        .catch(function (error) {
          showPush(false, error.message === 'permission'
            ? 'Notifications were not allowed. Allow them in the browser\u2019s site settings, then try again.'
            : 'Notifications could not be turned on (' + error.message + '). Try again.');
        }).then(function () { enable.disabled = false; });
    });
    disable.addEventListener('click', function () {
      disable.disabled = true;
      registration.pushManager.getSubscription().then(function (subscription) {
        if (!subscription) return null;
        var endpoint = subscription.endpoint;
        return subscription.unsubscribe().then(function () { return postJSON('/app/push/subscriptions/remove', { endpoint: endpoint }); });
      }).then(function () { showPush(false, 'Notifications are off for this device.'); })
        .catch(function (error) { pushState.textContent = 'Could not turn notifications off (' + error.message + ').'; })
        .then(function () { disable.disabled = false; });
    });
  }

  if (table && window.EventSource && offlineAsOf === undefined) {
    connect();
    window.addEventListener('pagehide', function () {
      disconnect();
      body.dataset.liveState = 'paused';
    });
    window.addEventListener('pageshow', function (event) {
      // A page restored from the back/forward cache shows what it showed when it was left: read it again, and
      // follow from where it stopped.
      if (!event.persisted) return;
      refresh();
      connect();
    });
  }
})();
