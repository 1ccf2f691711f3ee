"""Area: inputs that no output depends on."""

from gradcert.conformance.areas import _BASIC, Certify, drawn, feats


@drawn("unreachable", feats("unreachable", focus=_BASIC, depth=1))
def test_unreachable(gradcert: Certify) -> None:
    """Every case has inputs no output depends on, mostly with unary ops and binary ops (broadcasting)
    around them; branches and loops one level deep."""
    gradcert.gradients()


@drawn("unreachable", feats("unreachable", "if", "while", focus=_BASIC))
def test_unreachable_flow(gradcert: Certify) -> None:
    """Every case has inputs no output depends on, branches and loops, mostly with unary ops and binary
    ops (broadcasting) around them; branches and loops nested two deep."""
    gradcert.gradients()
