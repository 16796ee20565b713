"""The app port: an app's request comes in (`entrance`, `incoming`), becomes one fetch through
the rules (`fetch_endpoint`), and its answer goes back (`relay`).
"""
