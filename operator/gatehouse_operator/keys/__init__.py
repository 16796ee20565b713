"""Key handling: the keyring (what the operator seals table entries with for the proxies), the
sealing keys (what users seal values in Git with), the store's password, and turning a
connection's secret into a credential for the proxies."""
