"""Area: second order (the gradient of a gradient)."""

from .areas import certify_test, feats

test_second_order = certify_test("second_order", feats(ops=4, depth=1))
test_second_order_flow = certify_test("second_order", feats(depth=1))
