// Docket's service worker: keeps the pages a signed-in user opened readable offline (always fetched from the
// network first; a copy of each is kept, and shown with the time it was saved when the network fails), shows a
// pushed notification (one per notification id: a repeat replaces it) and opens its item when it is clicked.
'use strict';

// Pages are kept per person: in 'docket-pages-v2:' + the user name a page was rendered for (its body's data-user).
// The worker remembers whose pages the device shows offline (the last page loaded from docketd names them); when
// someone else signs in, the previous person's pages are deleted, and signed out (a page that sends to sign-in),
// none are shown. The script and styles are nobody's and kept apart.
var PAGES = 'docket-pages-v2:';
var ASSETS_CACHE = 'docket-assets-v1';
var VIEWER = 'docket-viewer-v1';
// Pages never kept: signing in and out, and the device sign-in.
var NEVER = /^\/app\/(login|logout|device|sw\.js|manifest)/;

self.addEventListener('fetch', function (event) {
  var request = event.request;
  if (request.method !== 'GET') return;
  var url = new URL(request.url);
  if (url.origin !== self.location.origin || url.pathname.indexOf('/app/') !== 0 || NEVER.test(url.pathname)) return;
  if (request.mode === 'navigate') {
    event.respondWith(fetch(request).then(function (response) {
      // A page as the signed-in user saw it (not a redirect to sign-in, not an error).
      if (response.ok && !response.redirected && (response.headers.get('Content-Type') || '').indexOf('text/html') === 0) {
        event.waitUntil(keep(url.pathname + url.search, response.clone()));
      } else if (response.redirected && new URL(response.url).pathname.indexOf('/app/login') === 0) {
        event.waitUntil(setViewer(''));
      }
      return response;
    }, function () { return saved(url.pathname + url.search); }));
  } else if (url.pathname.indexOf('/app/assets/') === 0) {
    event.respondWith(fetch(request).then(function (response) {
      if (response.ok) event.waitUntil(caches.open(ASSETS_CACHE).then(function (cache) { return cache.put(url.pathname, response.clone()); }));
      return response;
    }, function () {
      return caches.open(ASSETS_CACHE).then(function (cache) { return cache.match(url.pathname); }).then(function (found) { return found || Response.error(); });
    }));
  }
});

function viewer() {
  return caches.open(VIEWER).then(function (cache) { return cache.match('/viewer'); }).then(function (found) {
    return found ? found.text() : '';
  });
}

// Whose pages this device shows offline; anyone else's are deleted.
function setViewer(user) {
  return caches.open(VIEWER).then(function (cache) { return cache.put('/viewer', new Response(user)); }).then(function () {
    return caches.keys();
  }).then(function (names) {
    return Promise.all(names.filter(function (name) {
      return name.indexOf('docket-pages-') === 0 && name !== PAGES + user;
    }).map(function (name) { return caches.delete(name); }));
  });
}

function keep(key, response) {
  return response.text().then(function (text) {
    var found = /<body[^>]*\sdata-user="([^"]*)"/.exec(text);
    var user = found ? found[1] : '';
    return setViewer(user).then(function () {
      if (!user) return undefined;
      return caches.open(PAGES + user).then(function (cache) {
        return cache.put(key, new Response(text, { headers: { 'Content-Type': 'text/html; charset=utf-8', 'X-Docket-Saved': new Date().toISOString() } }));
      });
    });
  });
}

// The kept copy, marked with when it was saved (the page says so); a short page when there is none.
function saved(key) {
  return viewer().then(function (user) {
    return user ? caches.open(PAGES + user).then(function (cache) { return cache.match(key); }) : undefined;
  }).then(function (found) {
    if (!found) {
      return new Response('<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">' +
        '<title>Offline</title><link rel="stylesheet" href="/app/assets/app.css"></head><body data-offline-as-of="none"><main class="page">' +
        '<h1>You are offline</h1><p>This page was not opened on this device while online, so there is no copy of it here.</p>' +
        '<p><a href="/app/work">My work</a> and the items you opened are kept.</p></main></body></html>',
        { status: 200, headers: { 'Content-Type': 'text/html; charset=utf-8' } });
    }
    var when = found.headers.get('X-Docket-Saved') || '';
    return found.text().then(function (text) {
      return new Response(text.replace(/<body/, '<body data-offline-as-of="' + when + '"'), { headers: { 'Content-Type': 'text/html; charset=utf-8' } });
    });
  });
}
// Signing out forgets the kept pages: the sign-in page deletes these caches (see app.js).

// The script and styles every page needs, kept at install (a page may take them from the memory cache instead of
// asking this worker, so they would not be seen otherwise).
var ASSETS = ['/app/assets/app.css', '/app/assets/app.js', '/app/assets/icon.svg'];

self.addEventListener('install', function (event) {
  self.skipWaiting();
  event.waitUntil(caches.open(ASSETS_CACHE).then(function (cache) { return cache.addAll(ASSETS); }).catch(function () {}));
});
self.addEventListener('activate', function (event) { event.waitUntil(self.clients.claim()); });

self.addEventListener('push', function (event) {
  var message = {};
  try { message = event.data ? event.data.json() : {}; } catch (error) { message = { title: 'Docket', body: event.data ? event.data.text() : '' }; }
  var id = message.id || '';
  var url = id ? '/app/notifications/' + encodeURIComponent(id) : (message.url || '/app/notifications');
  event.waitUntil(self.registration.showNotification(message.title || 'Docket', {
    body: message.body || '',
    tag: id || undefined,
    icon: '/app/assets/icon.svg',
    data: { url: url }
  }));
});

self.addEventListener('notificationclick', function (event) {
  event.notification.close();
  var url = new URL((event.notification.data && event.notification.data.url) || '/app/notifications', self.location.origin).href;
  event.waitUntil(self.clients.matchAll({ type: 'window', includeUncontrolled: true }).then(function (windows) {
    for (var i = 0; i < windows.length; i += 1) {
      if (windows[i].url === url && 'focus' in windows[i]) return windows[i].focus();
    }
    return self.clients.openWindow(url);
  }));
});
