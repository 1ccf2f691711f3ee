"""Area: explicit cotangents, and gradients linear in them."""

from .areas import certify_test, feats

test_cotangents = certify_test("cotangents", feats("unary", "binary", required=("cotangents",)))
test_cotangents_outputs = certify_test(
    "cotangents", feats("unary", "binary", "reduction", required=("cotangents", "multi_output"))
)
