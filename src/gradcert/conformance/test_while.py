"""Area: while (loop-carried values, captured values, zero-trip loops)."""

from .areas import certify_test, feats

test_while = certify_test("while", feats("unary", "binary", required=("while",)))
test_while_mixed = certify_test("while", feats("unary", "binary", "reduction", "fanout", required=("while",)))
