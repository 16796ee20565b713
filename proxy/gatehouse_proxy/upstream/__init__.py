"""The upstream side: the HTTP client that calls a vendor (`forwarder`) behind the network guard
(`network_guard`).
"""
