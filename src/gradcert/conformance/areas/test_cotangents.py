"""Area: explicit cotangents, and gradients linear in them."""

from gradcert.conformance.areas import _BASIC, certify_test, feats

test_cotangents = certify_test("cotangents", feats("cotangents", focus=_BASIC, depth=1))
test_cotangents_outputs = certify_test(
    "cotangents", feats("cotangents", "multi_output", focus=("unary", "binary", "reduction"))
)
