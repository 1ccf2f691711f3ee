"""Area: along an axis -- softmax, log_softmax, cumsum, cumprod (zeros included), topk, and the
reductions that pick or multiply elements (max, min, prod, logsumexp, p_norm)."""

from gradcert.conformance.areas import _FLOW, certify_test, feats

test_along_axis = certify_test("along_axis", feats("along", focus=("unary", "reduction"), depth=1))
test_along_axis_flow = certify_test("along_axis", feats("along", "reduction", focus=_FLOW))
