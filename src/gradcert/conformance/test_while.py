"""Area: while (loop-carried values, captured values, zero-trip loops)."""

from .areas import certify_test, feats

test_while = certify_test("while", feats("while", ops=4, depth=1))
test_while_mixed = certify_test("while", feats("while"))
