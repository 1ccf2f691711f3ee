"""Area: combine/split and the vector ops."""

from gradcert.conformance.areas import certify_test, feats

test_vector = certify_test("combine_split", feats("vector", focus=("unary",), depth=1))
test_vector_mixed = certify_test("combine_split", feats("vector", focus=("unary", "binary", "shape")))
