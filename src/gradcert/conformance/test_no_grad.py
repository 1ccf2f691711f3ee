"""Area: the no-grad set."""

from .areas import certify_test, feats

test_no_grad = certify_test("no_grad", feats("no_grad", ops=4, depth=1))
test_no_grad_flow = certify_test("no_grad", feats("no_grad", "if", "while"))
