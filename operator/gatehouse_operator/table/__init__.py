"""The routing table's operator side: what the operator pushes to the proxy replicas, and when.

**What.** One entry per ExternalConnection that compiles (``connection_route``: origin, methods,
paths, limits, the credential encrypted with the keyring, or why it is unavailable) and one per
DataApp or ChartType (the hash of its token and its links). Nothing else: no spec, no plaintext
secret, no status. The shapes are the contract's (``gatehouse_contract.routes``, ``.frames``).

**When.** A handler puts or drops a route in the ``store`` and asks for a flush. Changes that
come within 50 ms of each other are taken together by the ``journal`` as one delta with a new
version (``channel.COALESCE_SECONDS``); the ``channel`` then sends each replica:

- on connecting, or once it fell further behind than the journal's history, a snapshot of the
  whole table in parts of 4 MiB (``SNAPSHOT_PART_BYTES``), built from each entry's JSON as
  serialised when it changed;
- after that, each delta in order;
- a heartbeat after 5 s (``HEARTBEAT_SECONDS``) of nothing else, which the replica
  acknowledges;
- a connection test when one runs (``gatehouse_operator.connections.testing``).

A freshly started operator sends nothing until the store has seen every resource that existed
when it started (``startup``), so a restart never pushes a partial table. Each replica's
acknowledgements are counted in ``replicas``; the ``rollout`` writes ``Ready`` once every
serving replica holds a resource's latest route. The ``budget`` keeps one namespace from taking
more than its share of a table every replica holds; ``indexes`` find what a Secret or a
connection affects; ``metrics`` expose the table and the replicas.
"""
