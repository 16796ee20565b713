"""The Gatehouse proxy: pins each app request to its connection's host and injects the credential.

It never imports the operator; the operator imports this package's routing-table contract.
"""
