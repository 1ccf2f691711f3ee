"""Area: inputs that no output depends on."""

from gradcert.conformance.areas import _BASIC, certify_test, feats

test_unreachable = certify_test("unreachable", feats("unreachable", focus=_BASIC, depth=1))
test_unreachable_flow = certify_test("unreachable", feats("unreachable", "if", "while", focus=_BASIC))
