"""Credentials: one injector per auth kind (`injectors`), and the tokens the minted kinds share
across the fleet (`fleet_tokens`, `token_grants`, `token_refusals`).
"""
