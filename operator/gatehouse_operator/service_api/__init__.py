"""The service API: what the BI product's UI and app builder call, served next to the operator."""
