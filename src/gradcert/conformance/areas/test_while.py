"""Area: while (loop-carried values, captured values, zero-trip loops)."""

from gradcert.conformance.areas import _BASIC, certify_test, feats

test_while = certify_test("while", feats("while", focus=_BASIC, depth=1))
test_while_mixed = certify_test("while", feats("while", focus=("unary", "binary", "reduction", "fanout")))
