"""Area: in-place nets."""

from .areas import certify_test, feats

test_inplace = certify_test("inplace", feats("inplace", ops=4, depth=1))
test_inplace_loops = certify_test("inplace", feats("inplace", "while"))
