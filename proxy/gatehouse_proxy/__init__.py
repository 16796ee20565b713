"""The Gatehouse proxy: pins each app request to its connection's host and injects the credential.

It shares nothing with the operator but their contract (``gatehouse_contract``).
"""
