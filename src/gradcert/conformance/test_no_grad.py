"""Area: the no-grad set."""

from .areas import certify_test, feats

test_no_grad = certify_test("no_grad", feats("unary", "binary", required=("no_grad",)))
test_no_grad_flow = certify_test("no_grad", feats("unary", "binary", "reduction", "if", required=("no_grad",)))
