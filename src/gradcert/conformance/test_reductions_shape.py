"""Area: reductions and shape ops."""

from .areas import certify_test, feats

test_reductions = certify_test("reductions_shape", feats("reduction", ops=4, depth=1))
test_shape_ops = certify_test("reductions_shape", feats("shape"))
