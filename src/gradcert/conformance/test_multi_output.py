"""Area: several outputs."""

from .areas import certify_test, feats

test_multi_output = certify_test("multi_output", feats("multi_output", ops=4, depth=1))
test_multi_output_flow = certify_test("multi_output", feats("multi_output", "if", "while"))
