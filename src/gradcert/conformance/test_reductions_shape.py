"""Area: reductions and shape ops."""

from .areas import certify_test, feats

test_reductions = certify_test("reductions_shape", feats("unary", "reduction", required=("reduction",)))
test_shape_ops = certify_test("reductions_shape", feats("unary", "binary", "shape", required=("shape",)))
