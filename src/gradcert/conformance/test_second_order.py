"""Area: second order (the gradient of a gradient)."""

from .areas import _BASIC, certify_test, feats

test_second_order = certify_test("second_order", feats(focus=_BASIC, depth=1))
test_second_order_flow = certify_test(
    "second_order", feats(focus=("unary", "binary", "reduction", "if", "while"), depth=1)
)
