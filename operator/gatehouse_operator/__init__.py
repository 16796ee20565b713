"""The Gatehouse operator: reconciles the gatehouse.dev resources and feeds the proxy.

The folder is called ``operator`` after the design card; the import name is ``gatehouse_operator``
because a top-level ``operator`` would shadow Python's standard library module.
"""
