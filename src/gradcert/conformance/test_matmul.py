"""Area: matmul."""

from .areas import certify_test, feats

test_matmul = certify_test("matmul", feats("matmul", ops=4, depth=1))
test_matmul_broadcast = certify_test("matmul", feats("matmul", "binary"))
