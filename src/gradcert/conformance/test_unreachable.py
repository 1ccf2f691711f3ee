"""Area: inputs that no output depends on."""

from .areas import certify_test, feats

test_unreachable = certify_test("unreachable", feats("unreachable", ops=4, depth=1))
test_unreachable_flow = certify_test("unreachable", feats("unreachable", "if", "while"))
