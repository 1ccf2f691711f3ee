"""Area: fan-out accumulation (one value read by several ops sums their contributions)."""

from .areas import certify_test, feats

test_fanout = certify_test("fanout", feats("unary", "binary", "reduction", required=("fanout",)))
test_fanout_wide = certify_test("fanout", feats("unary", "binary", "misc", required=("fanout",), ops=8))
