"""The routing table: what it holds (`routing_table`), the replica's end of the table channel it
arrives by (`feed`), and the connection tests that channel carries (`test_slots`).
"""
