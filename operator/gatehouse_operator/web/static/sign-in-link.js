// The one-time code arrives in the link's fragment, which browsers never send to a server: no
// access log or proxy keeps it. Taken out of the address bar (and history), then shown to the
// server same-origin, which says whose link it is (and spends nothing): only a click on "Sign in
// as ..." spends it. A link someone else made would sign in as them.
"use strict";
const code = new URLSearchParams(window.location.hash.slice(1)).get("code");
window.history.replaceState(null, "", window.location.pathname);
if (code) {
  const form = document.getElementById("code-form");
  document.getElementById("code").value = code;
  const body = new URLSearchParams({ code: code, preview: "json" });
  fetch(form.action, { method: "POST", body: body, credentials: "same-origin" })
    .then(async (reply) => {
      if (!reply.ok) {
        form.submit(); // the server's page says why (used, late, not this link)
        return;
      }
      const whose = (await reply.json()).requester;
      document.getElementById("whose").textContent = whose;
      document.getElementById("requester").hidden = false;
      document.getElementById("code-label").hidden = true;
      document.getElementById("confirm-field").value = "yes";
      document.getElementById("confirm").textContent = "Sign in as " + whose;
    })
    .catch(() => form.submit());
}
