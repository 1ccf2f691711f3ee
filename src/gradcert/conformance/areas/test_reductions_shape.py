"""Area: reductions and shape ops."""

from gradcert.conformance.areas import _BASIC, certify_test, feats

test_reductions = certify_test("reductions_shape", feats("reduction", focus=("unary",), depth=1))
test_shape_ops = certify_test("reductions_shape", feats("shape", focus=_BASIC))
