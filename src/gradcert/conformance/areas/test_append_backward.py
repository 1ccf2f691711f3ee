"""Area: `append_backward(loss, parameter_list=None, no_grad_set)`, with every input that takes a
gradient a parameter (a backend without such an API declares no `append_backward` capability).
One output, default cotangent: the loss."""

from gradcert.conformance.areas import certify_test, feats

_ONE_LOSS = ("cotangents", "multi_output")  # the API differentiates one loss, by its default cotangent
test_append_backward = certify_test(
    "append_backward", feats(focus=("unary", "binary", "reduction", "stop_gradient"), without=_ONE_LOSS, depth=1)
)
test_append_backward_flow = certify_test(
    "append_backward",
    feats(focus=("unary", "binary", "reduction", "if", "while", "no_grad", "stop_gradient"), without=_ONE_LOSS),
)
