"""Area: if."""

from .areas import certify_test, feats

test_if = certify_test("if", feats("if", ops=4, depth=1))
test_if_mixed = certify_test("if", feats("if"))
