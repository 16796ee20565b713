"""Key handling: the keyring (AES-GCM: what the operator encrypts the proxies' credentials with,
and derives the table channel's keys from), the sealing keys (HPKE: what users seal values in Git
with, opened only by the operator), the store's password, and turning a connection's secret into
a credential encrypted for the proxies."""
