"""Area: several outputs."""

from gradcert.conformance.areas import _BASIC, certify_test, feats

test_multi_output = certify_test("multi_output", feats("multi_output", focus=_BASIC, depth=1))
test_multi_output_flow = certify_test("multi_output", feats("multi_output", "if", "while", focus=_BASIC))
