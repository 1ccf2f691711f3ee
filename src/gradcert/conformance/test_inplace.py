"""Area: in-place nets."""

from .areas import certify_test, feats

test_inplace = certify_test("inplace", feats("unary", "binary", required=("inplace",)))
test_inplace_loops = certify_test("inplace", feats("unary", "binary", "while", "if", required=("inplace",)))
