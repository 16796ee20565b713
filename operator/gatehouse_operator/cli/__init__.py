"""The command-line tools: ``gatehouse`` (also the kubectl plugin), ``gatehouse-service``, and
what they share. Imports nothing here, so the console scripts load without the operator extra."""
