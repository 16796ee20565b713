"""Developer tooling: builds and runs a real local control plane for tests, `make up` and the demo.

Not shipped in the images; the operator and the proxy never import it.
"""
