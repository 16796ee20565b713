// A connect link's id arrives in the fragment, which browsers never send to a server: no access
// log or proxy keeps it. Taken out of the address bar (and history) and put in the form; the
// link is spent only by the click on "Continue", which sends the browser to the provider.
"use strict";
const flow = window.location.hash.slice(1);
window.history.replaceState(null, "", window.location.pathname);
if (flow) {
  document.getElementById("flow").value = flow;
  document.getElementById("flow-label").hidden = true;
}
