"""Area: second order (the gradient of a gradient)."""

from gradcert.conformance.areas import _BASIC, _FLOW, certify_test, feats

test_second_order = certify_test("second_order", feats(focus=_BASIC, depth=1))
test_second_order_flow = certify_test(
    "second_order", feats(focus=("unary", "binary", "reduction", "if", "while"), depth=1)
)
# the indexing ops and the ops along an axis, differentiated twice (float32 programs are not: their
# rounding, which curvature amplifies at second order, reaches 1e-4 of a gradient: docs/ops.md)
test_second_order_ops = certify_test("second_order", feats(focus=("index", "along", "unary"), depth=1))
# through branches and loops nested in one another (stacks saved on stacks)
test_second_order_nested = certify_test("second_order", feats("nested", focus=_FLOW, depth=2))
