"""Area: along an axis -- softmax, log_softmax, cumsum, cumprod (zeros included), topk, and the
reductions that pick or multiply elements (max, min, prod, logsumexp, p_norm)."""

from gradcert.conformance.areas import _FLOW, Certify, drawn, feats


@drawn("along_axis", feats("along", focus=("unary", "reduction"), depth=1))
def test_along_axis(gradcert: Certify) -> None:
    """Every case has ops along an axis, mostly with unary ops and reductions around them; branches and
    loops one level deep."""
    gradcert.gradients()


@drawn("along_axis", feats("along", "reduction", focus=_FLOW))
def test_along_axis_flow(gradcert: Certify) -> None:
    """Every case has ops along an axis and reductions, mostly with unary ops, binary ops
    (broadcasting), branches and loops around them; branches and loops nested two deep."""
    gradcert.gradients()
