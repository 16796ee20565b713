"""A request's way through the rules to the vendor and back: the ordered steps (``steps``), the
call upstream with the credential (``sending``), the 401 judgement (``refused_tokens``), the
vendor's pause (``vendor_pause``); the table and connection a request is routed by (``routing``).
"""
