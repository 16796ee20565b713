"""Credentials: one injector per auth kind behind one protocol (`injecting`, the kinds listed once
in `kinds`, the request path's calls dispatched by `injectors`), and the tokens the minted kinds
share across the fleet (`minting`, `fleet_tokens`, `token_grants`, `token_refusals`).
"""
