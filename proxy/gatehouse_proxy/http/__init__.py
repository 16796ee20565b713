"""HTTP's own grammar, with no policy of Gatehouse's: media types, `Retry-After`, content
codings, a body read whole within a bound."""
