"""Area: `append_backward(loss, parameter_list=None, no_grad_set)`, with every input that takes a
gradient a parameter (a backend without such an API declares no `append_backward` capability).
One output, default cotangent: the loss."""

from gradcert.conformance.areas import Certify, drawn, feats

_ONE_LOSS = ("cotangents", "multi_output")  # the API differentiates one loss, by its default cotangent


@drawn("append_backward", feats(focus=("unary", "binary", "reduction", "stop_gradient"), without=_ONE_LOSS, depth=1))
def test_append_backward(gradcert: Certify) -> None:
    """Cases, mostly with unary ops, binary ops (broadcasting), reductions and stop_gradient values;
    branches and loops one level deep; never explicit cotangents and several outputs."""
    gradcert.gradients()


@drawn(
    "append_backward",
    feats(focus=("unary", "binary", "reduction", "if", "while", "no_grad", "stop_gradient"), without=_ONE_LOSS),
)
def test_append_backward_flow(gradcert: Certify) -> None:
    """Cases, mostly with unary ops, binary ops (broadcasting), reductions, branches, loops, a no-grad
    set and stop_gradient values; branches and loops nested two deep; never explicit cotangents and
    several outputs."""
    gradcert.gradients()
