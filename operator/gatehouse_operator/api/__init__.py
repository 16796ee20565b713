"""The gatehouse.dev API: one typed model per kind, from which the CRDs are generated."""
