"""What is seen of a fetch: metrics, traces, the inspector's recent requests, usage counts, the
audit log, log lines.
"""
