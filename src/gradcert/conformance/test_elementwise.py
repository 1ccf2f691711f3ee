"""Area: elementwise and broadcasting."""

from .areas import certify_test, feats

test_unary = certify_test("elementwise", feats("unary", ops=4, depth=1))
test_binary_broadcasting = certify_test("elementwise", feats("binary"))
test_binary_fanout = certify_test("elementwise", feats("binary", "fanout", ops=4, depth=1))
