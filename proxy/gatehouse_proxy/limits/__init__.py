"""What a request may take: a connection's quotas counted for the fleet and the vendor's pause
(`quotas`, `vendor_pauses`), a tenant's turns, caps and bytes (`tenancy`).
"""
