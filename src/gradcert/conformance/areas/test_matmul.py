"""Area: matmul."""

from gradcert.conformance.areas import Certify, drawn, feats


@drawn("matmul", feats("matmul", focus=("unary",), depth=1))
def test_matmul(gradcert: Certify) -> None:
    """Every case has matmul, mostly with unary ops around them; branches and loops one level deep."""
    gradcert.gradients()


@drawn("matmul", feats("matmul", "binary", focus=("shape",)))
def test_matmul_broadcast(gradcert: Certify) -> None:
    """Every case has matmul and binary ops (broadcasting), mostly with shape ops around them; branches
    and loops nested two deep."""
    gradcert.gradients()
