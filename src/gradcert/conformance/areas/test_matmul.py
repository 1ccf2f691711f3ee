"""Area: matmul."""

from gradcert.conformance.areas import certify_test, feats

test_matmul = certify_test("matmul", feats("matmul", focus=("unary",), depth=1))
test_matmul_broadcast = certify_test("matmul", feats("matmul", "binary", focus=("shape",)))
