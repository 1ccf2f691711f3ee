"""Area: elementwise and broadcasting."""

from gradcert.conformance.areas import _BASIC, certify_test, feats

test_unary = certify_test("elementwise", feats("unary", focus=("unary",), depth=1))
test_binary_broadcasting = certify_test("elementwise", feats("binary", focus=_BASIC))
test_binary_fanout = certify_test("elementwise", feats("binary", "fanout", focus=_BASIC, depth=1))
