// Docket's service worker: shows a pushed notification (one per notification id: a repeat replaces it) and opens
// its item when it is clicked. It caches nothing: the pages are always fetched.
'use strict';

self.addEventListener('install', function () { self.skipWaiting(); });
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
