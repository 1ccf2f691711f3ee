"""Area: reductions and shape ops."""

from gradcert.conformance.areas import _BASIC, Certify, drawn, feats


@drawn("reductions_shape", feats("reduction", focus=("unary",), depth=1))
def test_reductions(gradcert: Certify) -> None:
    """Every case has reductions, mostly with unary ops around them; branches and loops one level deep."""
    gradcert.gradients()


@drawn("reductions_shape", feats("shape", focus=_BASIC))
def test_shape_ops(gradcert: Certify) -> None:
    """Every case has shape ops, mostly with unary ops and binary ops (broadcasting) around them;
    branches and loops nested two deep."""
    gradcert.gradients()
