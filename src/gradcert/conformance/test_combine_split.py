"""Area: combine/split and the vector ops."""

from .areas import certify_test, feats

test_vector = certify_test("combine_split", feats("unary", "vector", required=("vector",)))
test_vector_mixed = certify_test("combine_split", feats("unary", "binary", "shape", "vector", required=("vector",)))
