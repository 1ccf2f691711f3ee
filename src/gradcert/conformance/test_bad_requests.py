"""Area: bad requests (a cotangent of the wrong shape must be refused with a clear error)."""

from .areas import certify_test, feats

test_wrong_cotangent_shape = certify_test("bad_requests", feats("cotangents", ops=4, depth=1))
