"""Area: combine/split and the vector ops."""

from gradcert.conformance.areas import Certify, drawn, feats


@drawn("combine_split", feats("vector", focus=("unary",), depth=1))
def test_vector(gradcert: Certify) -> None:
    """Every case has combine/split and the vector ops, mostly with unary ops around them; branches and
    loops one level deep."""
    gradcert.gradients()


@drawn("combine_split", feats("vector", focus=("unary", "binary", "shape")))
def test_vector_mixed(gradcert: Certify) -> None:
    """Every case has combine/split and the vector ops, mostly with unary ops, binary ops
    (broadcasting) and shape ops around them; branches and loops nested two deep."""
    gradcert.gradients()
