"""PyTorch and JAX backends with one planted bug each: `tanh` lowered as the framework's own custom
gradient (`torch.autograd.Function`, `jax.custom_vjp`) whose backward is off by 1%.
`tests/test_torch_jax.py` checks that certification catches both, so a wrong framework gradient is
not lost in an adapter's mapping."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import torch

from gradcert.conformance import jax_backend, torch_backend


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
