"""Area: second order (the gradient of a gradient)."""

from .areas import certify_test, feats

test_second_order = certify_test("second_order", feats("unary", "binary"))
test_second_order_flow = certify_test("second_order", feats("unary", "binary", "reduction", "if", "while"))
