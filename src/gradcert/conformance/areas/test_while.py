"""Area: while (loop-carried values, captured values, zero-trip loops)."""

from gradcert.conformance.areas import _BASIC, Certify, drawn, feats


@drawn("while", feats("while", focus=_BASIC, depth=1))
def test_while(gradcert: Certify) -> None:
    """Every case has loops, mostly with unary ops and binary ops (broadcasting) around them; branches
    and loops one level deep."""
    gradcert.gradients()


@drawn("while", feats("while", focus=("unary", "binary", "reduction", "fanout")))
def test_while_mixed(gradcert: Certify) -> None:
    """Every case has loops, mostly with unary ops, binary ops (broadcasting), reductions and fan-out
    around them; branches and loops nested two deep."""
    gradcert.gradients()
