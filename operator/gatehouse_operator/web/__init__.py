"""The "Data app connections" page: server-rendered, served by the service API.

It is one more client of the service API's operations (same TokenReview, same
SubjectAccessReviews); changes a user makes (links) are made with the user's own token, so RBAC and
the admission webhook decide them as they decide ``kubectl``'s.
"""
