"""Area: in-place nets."""

from gradcert.conformance.areas import _BASIC, certify_test, feats

test_inplace = certify_test("inplace", feats("inplace", focus=_BASIC, depth=1))
test_inplace_loops = certify_test("inplace", feats("inplace", "while", focus=("unary", "binary", "if")))
