"""``service.config.yml``: its schema, the spec's rules as a library, and the compiler.

Modules: ``yaml_source`` (YAML 1.2, bounded, with lines), ``schema`` (the file's own keys, as typed
models), one per rule — ``time_intervals``, ``labels``, ``case_sensitivity``, ``parameters``
(substitution into SQL), ``custom_granularities``, ``table_groups`` —, ``compiler`` (the rules
over one file, with warnings), ``dbt_project`` (the models beside it), ``model_checks`` (the file
against the models) and ``explain`` (the rules resolved for one model or dimension).
"""
