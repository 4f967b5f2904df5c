// Optional: tells the pages the browser's time zone once, so times show in it before the
// customer picks one. Everything works without it.
(function () {
  if (document.cookie.indexOf("portal_tz_auto=") !== -1) return;
  try {
    var tz = Intl.DateTimeFormat().resolvedOptions().timeZone;
    var base = location.pathname.split("/").slice(0, 3).join("/");
    if (tz) document.cookie = "portal_tz_auto=" + encodeURIComponent(tz) + "; path=" + base + "; max-age=31536000; samesite=lax; secure";
  } catch (e) {}
})();
