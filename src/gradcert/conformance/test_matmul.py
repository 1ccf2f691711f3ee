"""Area: matmul."""

from .areas import certify_test, feats

test_matmul = certify_test("matmul", feats("unary", "matmul", required=("matmul",)))
test_matmul_broadcast = certify_test("matmul", feats("binary", "shape", "matmul", required=("matmul",)))
