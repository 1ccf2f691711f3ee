"""Area: explicit cotangents, and gradients linear in them."""

from .areas import certify_test, feats

test_cotangents = certify_test("cotangents", feats("cotangents", ops=4, depth=1))
test_cotangents_outputs = certify_test("cotangents", feats("cotangents", "multi_output"))
