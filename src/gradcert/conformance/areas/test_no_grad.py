"""Area: the no-grad set."""

from gradcert.conformance.areas import _BASIC, certify_test, feats

test_no_grad = certify_test("no_grad", feats("no_grad", focus=_BASIC, depth=1))
test_no_grad_flow = certify_test("no_grad", feats("no_grad", "if", "while", focus=("unary", "binary", "reduction")))
