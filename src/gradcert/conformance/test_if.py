"""Area: if."""

from .areas import certify_test, feats

test_if = certify_test("if", feats("unary", "binary", required=("if",)))
test_if_mixed = certify_test("if", feats("unary", "binary", "reduction", "shape", "fanout", required=("if",)))
