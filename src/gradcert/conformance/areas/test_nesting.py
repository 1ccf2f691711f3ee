"""Area: nested control flow (if in while, while in if, loops in loops)."""

from gradcert.conformance.areas import _FLOW, Certify, drawn, feats


@drawn("nesting", feats("nested", focus=_FLOW, depth=3))
def test_nested(gradcert: Certify) -> None:
    """Every case has branches and loops nested in one another, mostly with unary ops, binary ops
    (broadcasting), branches and loops around them; branches and loops nested three deep."""
    gradcert.gradients()


@drawn("nesting", feats("nested", focus=_FLOW, depth=4))
def test_nested_deep(gradcert: Certify) -> None:
    """Every case has branches and loops nested in one another, mostly with unary ops, binary ops
    (broadcasting), branches and loops around them; branches and loops nested four deep."""
    gradcert.gradients()
