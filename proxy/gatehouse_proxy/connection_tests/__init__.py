"""An operator's ConnectionTest run on this replica, through the same steps as an app's fetch
(``runs``)."""
