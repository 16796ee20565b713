"""The app port: an app's request comes in (`entrance`, `incoming`) and its answer goes back
(`relay`).
"""
