"""Area: float32 -- programs computing in float32, some inputs float64 cast to float32 on entry and
some outputs cast back; judged against their float64 twin (`Case.widened`) to float32 tolerances."""

from gradcert.conformance.areas import _FLOW, certify_test, feats

test_float32 = certify_test("float32", feats("float32", focus=("unary", "binary", "reduction", "matmul"), depth=1))
test_float32_ops = certify_test("float32", feats("float32", focus=("index", "along", "unary")))
test_float32_flow = certify_test("float32", feats("float32", focus=(*_FLOW, "inplace")))
