"""``service.config.yml``: its schema, the spec's rules as a library, and the compiler.

Modules, one rule each: ``schema`` (the file's own keys, as typed models), ``time_intervals``,
``labels``, ``case_sensitivity``, ``parameters`` (substitution into SQL), ``custom_granularities``,
``table_groups``, ``pre_aggregates``, and ``compiler`` (all of them over one file, with warnings).
"""
