"""Area: indexing -- gathers, scatters and index_add with duplicate indices, slice assignment."""

from gradcert.conformance.areas import _FLOW, certify_test, feats

test_indexing = certify_test("indexing", feats("index", focus=("unary",), depth=1))
test_indexing_flow = certify_test("indexing", feats("index", focus=(*_FLOW, "inplace")))
