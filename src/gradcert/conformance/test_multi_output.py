"""Area: several outputs."""

from .areas import certify_test, feats

test_multi_output = certify_test("multi_output", feats("unary", "binary", required=("multi_output",)))
test_multi_output_flow = certify_test(
    "multi_output", feats("unary", "binary", "if", "while", required=("multi_output",))
)
