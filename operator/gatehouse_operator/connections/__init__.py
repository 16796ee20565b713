"""The use cases of connections, apart from HTTP: what the service API, the page and the CLIs do.

``actions``: what a caller may do, as their RBAC allows (list, read, test and wait, try a draft,
save and delete samples, hand an app's links to its build). ``runs``: what a ConnectionTest run
for a caller is, and when it is done (shared with the ``gatehouse`` CLI). ``drafts``: trying a
connection that is not saved. ``testing``: sending one test request to a proxy replica and
reading what came back. ``sample_saving``: a test's answer kept as a sample, within the
sample limit. ``handoff``: the app-build hand-off. ``models``: what they take and
answer; ``errors``: how they say no.
"""
