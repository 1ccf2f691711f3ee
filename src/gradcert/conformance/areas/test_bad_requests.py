"""Area: bad requests (a cotangent of the wrong shape must be refused with a clear error)."""

from gradcert.conformance.areas import _BASIC, certify_test, feats

test_wrong_cotangent_shape = certify_test("bad_requests", feats("cotangents", focus=_BASIC, depth=1))
