"""Area: if."""

from gradcert.conformance.areas import _BASIC, Certify, drawn, feats


@drawn("if", feats("if", focus=_BASIC, depth=1))
def test_if(gradcert: Certify) -> None:
    """Every case has branches, mostly with unary ops and binary ops (broadcasting) around them;
    branches and loops one level deep."""
    gradcert.gradients()


@drawn("if", feats("if", focus=("unary", "binary", "reduction", "shape", "fanout")))
def test_if_mixed(gradcert: Certify) -> None:
    """Every case has branches, mostly with unary ops, binary ops (broadcasting), reductions, shape ops
    and fan-out around them; branches and loops nested two deep."""
    gradcert.gradients()
