"""Area: float32 -- programs computing in float32, some inputs float64 cast to float32 on entry and
some outputs cast back; judged against their float64 twin (`Case.widened`) to float32 tolerances."""

from gradcert.conformance.areas import _FLOW, Certify, drawn, feats


@drawn("float32", feats("float32", focus=("unary", "binary", "reduction", "matmul"), depth=1))
def test_float32(gradcert: Certify) -> None:
    """Every case has float32 programs, mostly with unary ops, binary ops (broadcasting), reductions
    and matmul around them; branches and loops one level deep."""
    gradcert.gradients()


@drawn("float32", feats("float32", focus=("index", "along", "unary")))
def test_float32_ops(gradcert: Certify) -> None:
    """Every case has float32 programs, mostly with indexing (duplicate indices, slice assignment), ops
    along an axis and unary ops around them; branches and loops nested two deep."""
    gradcert.gradients()


@drawn("float32", feats("float32", focus=(*_FLOW, "inplace")))
def test_float32_flow(gradcert: Certify) -> None:
    """Every case has float32 programs, mostly with unary ops, binary ops (broadcasting), branches,
    loops and in-place ops around them; branches and loops nested two deep."""
    gradcert.gradients()
