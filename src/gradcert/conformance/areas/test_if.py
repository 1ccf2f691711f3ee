"""Area: if."""

from gradcert.conformance.areas import _BASIC, certify_test, feats

test_if = certify_test("if", feats("if", focus=_BASIC, depth=1))
test_if_mixed = certify_test("if", feats("if", focus=("unary", "binary", "reduction", "shape", "fanout")))
