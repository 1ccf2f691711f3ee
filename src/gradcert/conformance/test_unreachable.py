"""Area: inputs that no output depends on."""

from .areas import certify_test, feats

test_unreachable = certify_test("unreachable", feats("unary", "binary", required=("unreachable",)))
test_unreachable_flow = certify_test("unreachable", feats("unary", "binary", "if", "while", required=("unreachable",)))
