"""Area: stop_gradient on inputs and intermediate values."""

from gradcert.conformance.areas import _BASIC, certify_test, feats

test_stop_gradient = certify_test("stop_gradient", feats("stop_gradient", focus=_BASIC, depth=1))
test_stop_gradient_flow = certify_test("stop_gradient", feats("stop_gradient", "if", "while", focus=_BASIC))
