"""The rules a request and its answer must pass: the method and path (`matcher`), the query, the
body, the headers the upstream is sent and the app is given, the objects copy headers name, the
answer's type.
"""
