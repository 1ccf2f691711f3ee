"""Area: fan-out accumulation (one value read by several ops sums their contributions)."""

from gradcert.conformance.areas import certify_test, feats

test_fanout = certify_test("fanout", feats("fanout", focus=("unary", "binary", "reduction"), depth=1))
test_fanout_wide = certify_test("fanout", feats("fanout", focus=("unary", "binary", "misc"), ops=8))
