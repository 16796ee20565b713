"""The person behind an app's request: the viewer's assertion verified against the issuers the
installation trusts (``assertions``), with their keys (``keys``) read from a JWKS URL at the
network edge (``jwks_http``) or a mounted Secret, and kept within bounds (``issuer_keys``)."""
