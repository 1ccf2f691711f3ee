"""Area: elementwise and broadcasting."""

from gradcert.conformance.areas import _BASIC, Certify, drawn, feats


@drawn("elementwise", feats("unary", focus=("unary",), depth=1))
def test_unary(gradcert: Certify) -> None:
    """Every case has unary ops around them; branches and loops one level deep."""
    gradcert.gradients()


@drawn("elementwise", feats("binary", focus=_BASIC))
def test_binary_broadcasting(gradcert: Certify) -> None:
    """Every case has binary ops (broadcasting), mostly with unary ops around them; branches and loops
    nested two deep."""
    gradcert.gradients()


@drawn("elementwise", feats("binary", "fanout", focus=_BASIC, depth=1))
def test_binary_fanout(gradcert: Certify) -> None:
    """Every case has binary ops (broadcasting) and fan-out, mostly with unary ops around them;
    branches and loops one level deep."""
    gradcert.gradients()
