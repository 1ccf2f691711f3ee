"""Area: stop_gradient on inputs and intermediate values."""

from .areas import certify_test, feats

test_stop_gradient = certify_test("stop_gradient", feats("unary", "binary", required=("stop_gradient",)))
test_stop_gradient_flow = certify_test(
    "stop_gradient", feats("unary", "binary", "while", "if", required=("stop_gradient",))
)
