"""What the operator and the proxy agree on, and the only code they share.

The routing table's entries (``routes``), how credentials are encrypted with the table keys
(``keyring``), the table channel's frames in both directions (``frames``) and how they travel
(``channel``, ``channel_tls``), the shapes of a connection test (``connection_tests``), and the few
rules both programs must apply alike: redacting a secret from a body (``redaction``), reading header
names as servers do and which are the proxy's (``header_names``), loading a Google key
(``google_keys``), reading settings (``env``), the deadline on a request's head
(``request_deadline``), and what both say of themselves: version, log lines, process metrics
(``observability``). It imports neither program; each imports the other only through here
(import-linter holds both to it).
"""
