"""Area: bad requests (a cotangent of the wrong shape must be refused with a clear error)."""

from gradcert.conformance.areas import _BASIC, Certify, drawn, feats


@drawn("bad_requests", feats("cotangents", focus=_BASIC, depth=1))
def test_wrong_cotangent_shape(gradcert: Certify) -> None:
    """Every case has explicit cotangents, mostly with unary ops and binary ops (broadcasting) around
    them; branches and loops one level deep."""
    gradcert.bad_request()
