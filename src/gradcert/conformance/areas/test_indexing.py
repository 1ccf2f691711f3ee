"""Area: indexing -- gathers, scatters and index_add with duplicate indices, slice assignment."""

from gradcert.conformance.areas import _FLOW, Certify, drawn, feats


@drawn("indexing", feats("index", focus=("unary",), depth=1))
def test_indexing(gradcert: Certify) -> None:
    """Every case has indexing (duplicate indices, slice assignment), mostly with unary ops around
    them; branches and loops one level deep."""
    gradcert.gradients()


@drawn("indexing", feats("index", focus=(*_FLOW, "inplace")))
def test_indexing_flow(gradcert: Certify) -> None:
    """Every case has indexing (duplicate indices, slice assignment), mostly with unary ops, binary ops
    (broadcasting), branches, loops and in-place ops around them; branches and loops nested two
    deep."""
    gradcert.gradients()
