"""Area: explicit cotangents, and gradients linear in them."""

from gradcert.conformance.areas import _BASIC, Certify, drawn, feats


@drawn("cotangents", feats("cotangents", focus=_BASIC, depth=1))
def test_cotangents(gradcert: Certify) -> None:
    """Every case has explicit cotangents, mostly with unary ops and binary ops (broadcasting) around
    them; branches and loops one level deep."""
    gradcert.linearity()


@drawn("cotangents", feats("cotangents", "multi_output", focus=("unary", "binary", "reduction")))
def test_cotangents_outputs(gradcert: Certify) -> None:
    """Every case has explicit cotangents and several outputs, mostly with unary ops, binary ops
    (broadcasting) and reductions around them; branches and loops nested two deep."""
    gradcert.linearity()
