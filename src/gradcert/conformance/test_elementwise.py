"""Area: elementwise and broadcasting."""

from .areas import certify_test, feats

test_unary = certify_test("elementwise", feats("unary"))
test_binary_broadcasting = certify_test("elementwise", feats("unary", "binary", required=("binary",)))
test_binary_fanout = certify_test("elementwise", feats("binary", "fanout", required=("binary", "fanout")))
