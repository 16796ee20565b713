"""Who may: the API server's TokenReview and SubjectAccessReview, the Kubernetes API as the
signed-in user, who may make a connection send a Secret's value, and the admission webhook's
server."""
