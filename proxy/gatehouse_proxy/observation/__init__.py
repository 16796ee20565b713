"""What is seen of a fetch: the fetch itself, its observers in order (metrics, traces, the
inspector's recent requests, usage counts, the audit log), log lines.
"""
