"""The shared store (Redis): its client, deadline and probe (`shared_store`), and each namespace's
share of it (`shares`). The only room that imports redis.
"""
