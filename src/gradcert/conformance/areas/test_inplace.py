"""Area: in-place nets."""

from gradcert.conformance.areas import _BASIC, Certify, drawn, feats


@drawn("inplace", feats("inplace", focus=_BASIC, depth=1))
def test_inplace(gradcert: Certify) -> None:
    """Every case has in-place ops, mostly with unary ops and binary ops (broadcasting) around them;
    branches and loops one level deep."""
    gradcert.gradients()


@drawn("inplace", feats("inplace", "while", focus=("unary", "binary", "if")))
def test_inplace_loops(gradcert: Certify) -> None:
    """Every case has in-place ops and loops, mostly with unary ops, binary ops (broadcasting) and
    branches around them; branches and loops nested two deep."""
    gradcert.gradients()
