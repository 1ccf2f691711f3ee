"""Area: fan-out accumulation (one value read by several ops sums their contributions)."""

from .areas import certify_test, feats

test_fanout = certify_test("fanout", feats("fanout", ops=4, depth=1))
test_fanout_wide = certify_test("fanout", feats("fanout", ops=8))
