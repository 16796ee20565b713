"""The upstream side: the HTTP client that calls a vendor (`forwarder`) behind the network guard
(`network_guard`), over each connection's own TLS where it has one (`connection_tls`).
"""
