// The one-time code arrives in the link's fragment, which browsers never send to a server: no
// access log or proxy keeps it. Taken out of the address bar (and history), then posted once,
// same-origin; the exchange spends it.
"use strict";
const code = new URLSearchParams(window.location.hash.slice(1)).get("code");
window.history.replaceState(null, "", window.location.pathname);
if (code) {
  document.getElementById("code").value = code;
  document.getElementById("code-form").submit();
}
