"""Area: the no-grad set."""

from gradcert.conformance.areas import _BASIC, Certify, drawn, feats


@drawn("no_grad", feats("no_grad", focus=_BASIC, depth=1))
def test_no_grad(gradcert: Certify) -> None:
    """Every case has a no-grad set, mostly with unary ops and binary ops (broadcasting) around them;
    branches and loops one level deep."""
    gradcert.gradients()


@drawn("no_grad", feats("no_grad", "if", "while", focus=("unary", "binary", "reduction")))
def test_no_grad_flow(gradcert: Certify) -> None:
    """Every case has a no-grad set, branches and loops, mostly with unary ops, binary ops
    (broadcasting) and reductions around them; branches and loops nested two deep."""
    gradcert.gradients()
