"""How each process is put together: one module per process.

``controller``: the leader's kopf handlers for start-up and shut-down, its servers (the table
channel, metrics, the service API and page) and its ``housekeeping`` duties. ``webhook``: the
admission webhook's process (``--role=webhook``). ``front_end``: the service API and the page as
one app, which the controller serves and ``gatehouse_dev.page_server`` serves alone.
"""
