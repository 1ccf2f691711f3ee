"""Area: stop_gradient on inputs and intermediate values."""

from .areas import certify_test, feats

test_stop_gradient = certify_test("stop_gradient", feats("stop_gradient", ops=4, depth=1))
test_stop_gradient_flow = certify_test("stop_gradient", feats("stop_gradient", "if", "while"))
