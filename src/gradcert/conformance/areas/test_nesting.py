"""Area: nested control flow (if in while, while in if, loops in loops)."""

from gradcert.conformance.areas import _FLOW, certify_test, feats

test_nested = certify_test("nesting", feats("nested", focus=_FLOW, depth=3))
test_nested_deep = certify_test("nesting", feats("nested", focus=_FLOW, depth=4))
