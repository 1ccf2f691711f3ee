"""The reference backward against finite differences on hand-written programs (tests/programs and
examples), with its invariants, its request contract and second order."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gradcert.reference import ProgramBuilder, Value, f64, parse_program, print_program
from gradcert.reference.autodiff.backward import append_backward, grad
from gradcert.reference.autodiff.gradients import compute
from gradcert.reference.autodiff.invariants import check, snapshot, violations
from gradcert.reference.domains import safe_inputs
from gradcert.reference.finite_diff import held_values, jacobian_vjp
from gradcert.reference.ir import Program, clone
from gradcert.reference.ir.loader import load_program
from gradcert.reference.ir.types import is_differentiable

from ..conftest import EXAMPLES, ROOT

PROGRAMS = sorted((ROOT / "tests" / "programs").glob("*.gc")) + EXAMPLES


def request(path: Path) -> dict[str, str]:
    """The `# grad: key=value flag` header of a program file."""
    for line in path.read_text().splitlines():
        if line.startswith("# grad:"):
            return dict((w.split("=", 1) + [""])[:2] for w in line[7:].split())  # type: ignore[misc]
    return {}


def values_named(p: Program, names: str) -> list[Value]:
    wanted = [n for n in names.split(",") if n]
    found = {v.name: v for v in p.inputs}
    for op in p.walk():
        found.update({r.name: r for r in op.results})
    return [found[n] for n in wanted]


def check_against_fd(p: Program, req: dict[str, str], seed: int = 0) -> None:
    xs = safe_inputs(p, seed)
    rng = np.random.default_rng(seed + 1)
    idx = [int(i) for i in req["outputs"].split(",")] if "outputs" in req else range(len(p.outputs))
    outs = [p.outputs[i] for i in idx if is_differentiable(p.outputs[i].type)]
    wrt = [v for v in p.inputs if is_differentiable(v.type)]
    no_grad = values_named(p, req.get("no_grad", ""))
    base = [np.asarray(y) for y in __import__("gradcert").reference.run(p, xs).outputs]
    cots = [rng.normal(size=np.shape(base[p.outputs.index(y)])) if "cotangents" in req else None for y in outs]

    got = compute(p, xs, outs, wrt, cots, no_grad, checked=True)
    assert got.before is not None
    check(got.transformed, got.before)

    full_cots = [np.zeros(np.shape(b)) for b in base]
    for y, u in zip(outs, cots):
        full_cots[p.outputs.index(y)] = u if u is not None else np.ones(np.shape(base[p.outputs.index(y)]))
    held = held_values(p, no_grad)
    expect, valid = jacobian_vjp(p, xs, [p.inputs.index(v) for v in wrt], full_cots, held)
    assert valid, "the finite differences crossed a branch or kink: choose other inputs"
    must_be_none = set(req.get("expect_none", "").split(",")) - {""}
    for v, g, e in zip(wrt, got.grads, expect):
        if v.name in must_be_none or v.stop_gradient or v in no_grad:
            assert g is None, f"%{v.name} must have no gradient"
        elif g is None:
            np.testing.assert_allclose(e, 0.0, atol=1e-9, err_msg=f"%{v.name} has no gradient but FD is nonzero")
        else:
            assert g.shape == e.shape
            rtol = float(req.get("rtol", 1e-6))
            np.testing.assert_allclose(g, e, rtol=rtol, atol=1e-8, err_msg=f"gradient of %{v.name}")


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_gradient_matches_finite_differences(path: Path) -> None:
    check_against_fd(load_program(path), request(path))


@pytest.mark.parametrize("path", [p for p in PROGRAMS if "cotangents" not in request(p)][:12], ids=lambda p: p.stem)
def test_with_explicit_cotangents(path: Path) -> None:
    check_against_fd(load_program(path), {**request(path), "cotangents": ""}, seed=5)


def test_at_least_40_programs() -> None:
    assert len(PROGRAMS) >= 40


# --- structure of the backward program ----------------------------------------------------------


def _grad_all(src: str) -> tuple[Program, Any]:
    p = parse_program(src)
    before = snapshot(p)
    g = grad(p, p.outputs, [v for v in p.inputs if is_differentiable(v.type)])
    return p, (g, before)


def test_fanout_sums_with_add_n_and_two_with_add() -> None:
    p, (g, before) = _grad_all((ROOT / "examples" / "fanout.gc").read_text())
    names = [op.name for op in g.added]
    assert names.count("add_n") == 1 and "combine" in names
    check(g, before)


def test_no_zero_fill_for_an_unused_split_result() -> None:
    p, (g, before) = _grad_all((ROOT / "tests" / "programs" / "split_partial.gc").read_text())
    fills = [op for op in g.added if op.name in ("full", "full_like")]
    # ones for the output, zeros only for the two unused pieces that combine needs
    assert sorted(op.name for op in fills) == ["full", "full", "full_like"]
    check(g, before)


def test_pruned_branch_gets_no_backward_ops() -> None:
    src = (
        "program(%x: f64[3], %y: f64[3]) {\n"
        "  %a = tanh(%x) : f64[3]\n"
        "  %b = exp(%y) : f64[3]\n"
        "  %c = add(%a, %b) : f64[3]\n"
        "  return %c\n"
        "}\n"
    )
    p = parse_program(src)
    before = snapshot(p)
    g = grad(p, p.outputs, [p.inputs[0]])
    assert {op.origin.name for op in g.added if op.origin is not None} == {"tanh", "add"}
    check(g, before)


def test_every_backward_op_records_its_origin() -> None:
    p, (g, _) = _grad_all((ROOT / "examples" / "while_nested.gc").read_text())
    unattributed = [op for op in g.added if op.origin is None]
    assert len(g.added) > 20
    # only the final sums of an input's several contributions belong to no single forward op
    assert all(op.name in ("add", "add_n", "combine") and op.parent is p.block for op in unattributed)


def test_the_backwards_pruning_is_the_invariants_reckoning() -> None:
    """The invariants take what depends on the inputs from the backward's pruning (`Gradients.reach`):
    it must be what they would reckon themselves, from the forward ops and the request, on drawn
    programs of every feature."""
    from gradcert.generators import draw_case
    from gradcert.reference.autodiff import prune
    from gradcert.reference.autodiff.backward import blocked_values

    n = 0
    for seed in range(300):
        case = draw_case(seed)
        request = (case.output_values, case.wrt_values, case.cotangents, case.no_grad)
        c = compute(case.program, case.inputs, *request, checked=True)
        g, forward = c.transformed, c.before.ops  # type: ignore[union-attr]
        own = prune.reachable(g.program.block, g.inputs, blocked_values(g.program, g.no_grad, forward), forward)
        assert g.reach == own, seed
        n += bool(own)
    assert n > 250


def test_backward_is_deterministic() -> None:
    src = (ROOT / "examples" / "if_in_while.gc").read_text()
    a, _ = _grad_all(src)
    b, _ = _grad_all(src)
    assert print_program(a) == print_program(b)


def test_invariants_catch_a_leftover_zero_fill_and_a_dead_op() -> None:
    p, (g, before) = _grad_all((ROOT / "examples" / "unary.gc").read_text())
    from gradcert.reference.ir.builder import Builder

    b = Builder(p.block)
    z = b.full(shape=[5], value=0.0, dtype="f64")
    d = b.tanh(p.inputs[0])
    g.added |= {z.op, d.op}
    found = violations(g, before)
    assert any("zero-fill" in f and "'full'" in f for f in found)
    assert any("dead backward op" in f and "'tanh'" in f for f in found)


def test_invariants_catch_a_changed_forward() -> None:
    p, (g, before) = _grad_all((ROOT / "examples" / "unary.gc").read_text())
    assert violations(g, before) == []
    p.block.ops[0].attrs = {"x": 1}
    assert any("forward op" in f and "changed" in f for f in violations(g, before))


def test_invariants_catch_a_removed_and_a_reordered_forward() -> None:
    p, (g, before) = _grad_all((ROOT / "examples" / "unary.gc").read_text())
    p.block.ops[1], p.block.ops[2] = p.block.ops[2], p.block.ops[1]  # sin and cos swapped
    found = violations(g, before)
    assert any("reordered" in f for f in found) and not any("removed" in f or "changed" in f for f in found)
    p, (g, before) = _grad_all((ROOT / "examples" / "unary.gc").read_text())
    relu = next(op for op in p.block.ops if op.name == "relu")
    p.block.ops.remove(relu)
    found = violations(g, before)
    assert [f for f in found if "forward op" in f] == ["forward op line ?: 'relu' %<undefined> was removed"], found
    assert not any("reordered" in f or "changed" in f for f in found)


def test_invariants_catch_a_backward_op_off_every_path() -> None:
    p, (g, before) = _grad_all((ROOT / "examples" / "unary.gc").read_text())
    assert violations(g, before) == []
    # judged as the gradients of the chain's `abs` alone: relu's backward ops lie off every path
    g.outputs = [next(op for op in p.block.ops if op.name == "abs").results[0]]
    found = violations(g, before)
    assert any("which no input-to-output path crosses" in f and "'relu'" in f for f in found), found


# --- the request contract -----------------------------------------------------------------------


def _simple() -> tuple[Program, Value, Value]:
    pb = ProgramBuilder()
    x = pb.input("x", f64(3))
    y = pb.tanh(x)
    return pb.build(y), x, y


def test_cotangent_of_wrong_shape_is_a_value_error_naming_both_shapes() -> None:
    p, x, y = _simple()
    from gradcert.reference.autodiff.gradients import add_input

    u = add_input(p, "u", f64(4))
    with pytest.raises(ValueError, match=r"grad_outputs\[0\] has shape \[4\] but output 0 has shape \[3\]"):
        grad(p, [y], [x], [u])


def test_cotangent_of_wrong_dtype_warns() -> None:
    p, x, y = _simple()
    from gradcert.reference.autodiff.gradients import add_input
    from gradcert.reference.ir.types import TensorType

    u = add_input(p, "u", TensorType((3,), "f32"))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with pytest.raises(Exception):  # noqa: B017 - after the warning the types cannot be summed
            grad(p, [y], [x], [u])
    assert any("dtype" in str(m.message) for m in w)


def test_grad_outputs_length_must_match() -> None:
    p, x, y = _simple()
    with pytest.raises(ValueError, match="1 outputs"):
        grad(p, [y], [x], [None, None])


def test_append_backward_defaults_to_every_input_needing_a_gradient() -> None:
    pb = ProgramBuilder()
    x = pb.input("x", f64(3))
    w = pb.input("w", f64(3), stop_gradient=True)
    b = pb.input("b", f64(3))
    loss = pb.sum(pb.multiply(pb.add(x, b), w))
    p = pb.build(loss)
    pairs = append_backward(p, loss, no_grad=[b])
    assert [v.name for v, _ in pairs] == ["x"]
    assert pairs[0][1] is not None
    with pytest.raises(ValueError, match="one-element loss"):
        append_backward(p, x)


# --- second order -------------------------------------------------------------------------------

SECOND_ORDER = [
    "examples/unary.gc",
    "examples/broadcast.gc",
    "examples/matmul.gc",
    "examples/reductions.gc",
    "examples/fanout.gc",
    "examples/inplace.gc",
    "examples/while_basic.gc",
    "examples/if_nested.gc",
    "tests/programs/pow_both.gc",
    "tests/programs/while_captured_after.gc",
    "tests/programs/if_yields_outer.gc",
    "tests/programs/divide_input.gc",
    "tests/programs/while_swap.gc",
    "tests/programs/vector_through_if.gc",
    # nested regions: stacks saved on stacks, and their cotangent stacks likewise
    "examples/while_nested.gc",
    "examples/if_in_while.gc",
    "examples/while_in_if.gc",
    "tests/programs/nested_if_while_if.gc",
]


def first_order_program(p: Program) -> Program:
    """A copy of `p` whose outputs are its first-order gradients (default cotangents)."""
    q, m = clone(p)
    wrt = [m[v] for v in p.inputs if is_differentiable(v.type) and not v.stop_gradient]
    g = grad(q, [m[y] for y in p.outputs if is_differentiable(y.type)], wrt)
    q.outputs = [v for v in g.grads if v is not None]
    return q


@pytest.mark.parametrize("rel", SECOND_ORDER, ids=lambda r: Path(r).stem)
def test_second_order_matches_finite_differences_of_first_order(rel: str) -> None:
    q = first_order_program(load_program(ROOT / rel))
    from gradcert.reference.ir.verifier import verify

    verify(q)
    check_against_fd(q, {"cotangents": ""}, seed=2)


def test_second_order_through_nested_loops_has_no_leftover_ops() -> None:
    """The second backward of a loop in a loop leaves no dead op or zero-fill (the invariants)."""
    q = first_order_program(load_program(ROOT / "examples" / "while_nested.gc"))
    before = snapshot(q)
    g = grad(q, q.outputs, [v for v in q.inputs if is_differentiable(v.type)])
    assert violations(g, before) == []
    # pushes and pops on the cotangent stacks pair up: as many of each in the program's text
    added = [op.name for op in g.program.walk() if op in g.added]
    assert added.count("tuple_push") == added.count("tuple_pop") >= 4
