"""PyTorch, JAX and TensorFlow backends with one planted bug each: `tanh` lowered as the framework's
own custom gradient (`torch.autograd.Function`, `jax.custom_vjp`, `tf.custom_gradient`) whose
backward is off by 1%. `tests/backends/test_torch_jax.py` and `test_tensorflow.py` check that
certification catches each, so a wrong framework gradient is not lost in an adapter's mapping.
And Paddle with a defect planted in its answers inside loop bodies and `if` branches, areas where
Paddle has known defects of its own: `tests/backends/test_paddle.py` checks that each is found
beside Paddle's known ones."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import torch

from gradcert.backends import jax as jax_backend
from gradcert.backends import paddle as paddle_backend
from gradcert.backends import tensorflow as tf_backend
from gradcert.backends import torch as torch_backend


class _TanhOff(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return g * (1 - y * y) * 1.01


class TorchTanhOff(torch_backend.TorchBackend):
    name = "torch-tanh-off"
    table = {**torch_backend.TABLE, "tanh": lambda low, op, a: _TanhOff.apply(a[0])}


@jax.custom_vjp
def _jax_tanh_off(x: Any) -> Any:
    return jnp.tanh(x)


def _fwd(x: Any) -> tuple[Any, Any]:
    y = jnp.tanh(x)
    return y, y


def _bwd(y: Any, g: Any) -> tuple[Any]:
    return (g * (1 - y * y) * 1.01,)


_jax_tanh_off.defvjp(_fwd, _bwd)


class JaxTanhOff(jax_backend.JaxBackend):
    name = "jax-tanh-off"
    table = {**jax_backend.TABLE, "tanh": lambda low, op, a: _jax_tanh_off(a[0])}


def _tf_tanh_off(tf: Any, x: Any) -> Any:
    # (TensorFlow is imported by the backend at its first case: this module imports none of it)
    @tf.custom_gradient
    def tanh(x: Any) -> Any:
        y = tf.tanh(x)
        return y, lambda g: g * (1 - y * y) * 1.01

    return tanh(x)


class TensorflowTanhOff(tf_backend.TensorflowBackend):
    name = "tensorflow-tanh-off"
    table = {**tf_backend.TABLE, "tanh": lambda low, op, a: _tf_tanh_off(low.ns, a[0])}


class _PaddleOpOnInputs(paddle_backend.PaddleBackend):
    """Paddle, but the gradient of every input that `op` reads is spoiled (`spoil`): a wrong rule of
    one op, met wherever the op reads a program's input, a cause none of Paddle's own defects has."""

    op = ""

    def spoil(self, g: Any) -> Any:
        raise NotImplementedError

    def run(self, case: Any) -> Any:
        r = super().run(case)
        read = {v for o in case.program.walk() if o.name == self.op for v in o.operands}
        r.grads = [
            self.spoil(g) if case.program.inputs[i] in read and g is not None else g for g, i in zip(r.grads, case.wrt)
        ]
        return r


class PaddleSigmoidScaled(_PaddleOpOnInputs):
    """`sigmoid`'s gradient half again too large: planted in the loop area, where Paddle has known
    defects of its own of the same kind (wrong values)."""

    name = "paddle-sigmoid-scaled"
    op = "sigmoid"

    def spoil(self, g: Any) -> Any:
        return g * 1.5


class PaddleSumNone(_PaddleOpOnInputs):
    """`sum`'s gradient lost (None): planted in the branch area, where Paddle has known defects of its
    own of the same kind (None where a gradient belongs)."""

    name = "paddle-sum-none"
    op = "sum"

    def spoil(self, g: Any) -> Any:
        return None
