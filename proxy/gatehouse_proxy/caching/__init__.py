"""The fleet's response cache: answers kept in the shared store, identical misses coalesced onto
one vendor call across every replica and worker (see :mod:`.response_cache`)."""
