"""Area: several outputs."""

from gradcert.conformance.areas import _BASIC, Certify, drawn, feats


@drawn("multi_output", feats("multi_output", focus=_BASIC, depth=1))
def test_multi_output(gradcert: Certify) -> None:
    """Every case has several outputs, mostly with unary ops and binary ops (broadcasting) around them;
    branches and loops one level deep."""
    gradcert.gradients()


@drawn("multi_output", feats("multi_output", "if", "while", focus=_BASIC))
def test_multi_output_flow(gradcert: Certify) -> None:
    """Every case has several outputs, branches and loops, mostly with unary ops and binary ops
    (broadcasting) around them; branches and loops nested two deep."""
    gradcert.gradients()
