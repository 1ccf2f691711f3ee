"""Area: stop_gradient on inputs and intermediate values."""

from gradcert.conformance.areas import _BASIC, Certify, drawn, feats


@drawn("stop_gradient", feats("stop_gradient", focus=_BASIC, depth=1))
def test_stop_gradient(gradcert: Certify) -> None:
    """Every case has stop_gradient values, mostly with unary ops and binary ops (broadcasting) around
    them; branches and loops one level deep."""
    gradcert.gradients()


@drawn("stop_gradient", feats("stop_gradient", "if", "while", focus=_BASIC))
def test_stop_gradient_flow(gradcert: Certify) -> None:
    """Every case has stop_gradient values, branches and loops, mostly with unary ops and binary ops
    (broadcasting) around them; branches and loops nested two deep."""
    gradcert.gradients()
