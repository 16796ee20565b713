"""Leader election for the controller: the Lease, and running kopf only while it is held."""
