"""Area: fan-out accumulation (one value read by several ops sums their contributions)."""

from gradcert.conformance.areas import Certify, drawn, feats


@drawn("fanout", feats("fanout", focus=("unary", "binary", "reduction"), depth=1))
def test_fanout(gradcert: Certify) -> None:
    """Every case has fan-out, mostly with unary ops, binary ops (broadcasting) and reductions around
    them; branches and loops one level deep."""
    gradcert.gradients()


@drawn("fanout", feats("fanout", focus=("unary", "binary", "misc"), ops=8))
def test_fanout_wide(gradcert: Certify) -> None:
    """Every case has fan-out, mostly with unary ops, binary ops (broadcasting) and other ops around
    them; branches and loops nested two deep, up to 8 steps."""
    gradcert.gradients()
