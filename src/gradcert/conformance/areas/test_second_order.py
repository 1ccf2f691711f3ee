"""Area: second order (the gradient of a gradient)."""

from gradcert.conformance.areas import _BASIC, _FLOW, Certify, drawn, feats


@drawn("second_order", feats(focus=_BASIC, depth=1))
def test_second_order(gradcert: Certify) -> None:
    """Cases, mostly with unary ops and binary ops (broadcasting); branches and loops one level deep."""
    gradcert.gradients()


@drawn("second_order", feats(focus=("unary", "binary", "reduction", "if", "while"), depth=1))
def test_second_order_flow(gradcert: Certify) -> None:
    """Cases, mostly with unary ops, binary ops (broadcasting), reductions, branches and loops;
    branches and loops one level deep."""
    gradcert.gradients()


# the indexing ops and the ops along an axis, differentiated twice (float32 programs are not: their
# rounding, which curvature amplifies at second order, reaches 1e-4 of a gradient: docs/ops.md)
@drawn("second_order", feats(focus=("index", "along", "unary"), depth=1))
def test_second_order_ops(gradcert: Certify) -> None:
    """Cases, mostly with indexing (duplicate indices, slice assignment), ops along an axis and unary
    ops; branches and loops one level deep."""
    gradcert.gradients()


# through branches and loops nested in one another (stacks saved on stacks)
@drawn("second_order", feats("nested", focus=_FLOW, depth=2))
def test_second_order_nested(gradcert: Certify) -> None:
    """Every case has branches and loops nested in one another, mostly with unary ops, binary ops
    (broadcasting), branches and loops around them; branches and loops nested two deep."""
    gradcert.gradients()
