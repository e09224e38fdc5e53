"""Random valid models for property tests and tools: the hypothesis strategy
:func:`random_models` and the pipeline check :func:`check_pipeline`.

The graphs mix what the passes rewrite and what they must leave alone: Transposes with random
permutations (and the inverses of earlier ones, so that pairs can meet), elementwise unary ops
(Relu, Clip, Sigmoid, Cast to double and back, ...), broadcasting binary ops with constants of
every broadcastable shape and with other values, Concat / Split / Slice / Pad, Reduce* with random
axes with and without keepdims, Softmax, Squeeze / Unsqueeze, values read by several nodes, and
If nodes (nested) whose branches read values of the enclosing graphs. Inputs may have symbolic
dimensions (a batch "N", a free "S"), which parity then checks at two sizes; initializers are
sometimes listed as graph inputs, as old exporters did.

Used by tests/test_random_graphs.py, tests/test_determinism.py and ``tools/random_graphs.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import graphfix

__all__ = ["random_models", "check_pipeline", "signature", "FAST_PASSES"]

FLOAT, DOUBLE, BOOL = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.BOOL
_NP = {FLOAT: np.float32, DOUBLE: np.float64, BOOL: np.bool_}

# Smooth ops only: a reduction whose elements are added in another order may differ in the last
# bit, and a discontinuous op after it (Sign, Floor, a Cast to int) would turn that bit into a
# different value, which is not a bug of any pass.
UNARY = ("Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Identity", "Softsign", "LeakyRelu")
BINARY = ("Add", "Sub", "Mul", "Max", "Min", "Div")
REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL2")
# The default pipeline without onnxsim (which costs an interpreter start per example).
FAST_PASSES = ("remove-initializer-inputs", "eliminate-transposes", "ort-offline",
               "eliminate-transposes")
_REDUCE_AXES_INPUT_FROM = {"ReduceSum": 13}  # the others take axes as an input from opset 18

Draw = Callable[[st.SearchStrategy], object]


@dataclasses.dataclass
class _Value:
    shape: tuple[int | str, ...]
    dtype: int


def _broadcast(a: Sequence[int | str], b: Sequence[int | str]) -> tuple[int | str, ...] | None:
    """Numpy broadcasting of two shapes whose dims may be symbols; None when they may not
    broadcast at every size of the symbols (a symbol only meets 1 or itself)."""
    out: list[int | str] = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(reversed(out))


class _Scope:
    """One graph being built (the main graph or an If branch): its nodes, initializers, and
    the values it can read (its own and those its enclosing graphs had defined before)."""

    def __init__(self, parent: _Scope | None = None) -> None:
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.own: dict[str, _Value] = {}
        self.outer: dict[str, _Value] = dict(parent.visible()) if parent is not None else {}

    def visible(self) -> dict[str, _Value]:
        return {**self.outer, **self.own}


class _Builder:
    def __init__(self, draw: Draw, opset: int) -> None:
        self.draw = draw
        self.opset = opset
        self.count = 0
        self.perms: list[tuple[int, ...]] = []
        self.cond_input: str | None = None
        self.casts: set[str] = set()
        self.hidden_from_bodies: set[str] = set()
        self.main = _Scope()

    # ------------------------------------------------------------ small helpers
    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def const(self, scope: _Scope, value: np.ndarray, base: str = "c") -> str:
        """A constant: an initializer of this graph or of the main graph, or a Constant node."""
        name = self.name(base)
        where = self.draw(st.sampled_from(["init", "init", "constant", "outer"]))
        if where == "constant":
            scope.nodes.append(helper.make_node(
                "Constant", [], [name], value=numpy_helper.from_array(value, name)))
        elif where == "outer" and scope.parent is not None:
            self.main.inits.append(numpy_helper.from_array(value, name))
        else:
            scope.inits.append(numpy_helper.from_array(value, name))
        return name

    def ints(self, scope: _Scope, values: Sequence[int]) -> str:
        return self.const(scope, np.array(list(values), np.int64))

    def floats(self, shape: Sequence[int], dtype: int, *, nonzero: bool = False) -> np.ndarray:
        seed = self.draw(st.integers(0, 2**16))
        rng = np.random.default_rng(seed)
        value = rng.uniform(-1.5, 1.5, tuple(shape))
        if nonzero:
            value = np.where(np.abs(value) < 0.5, np.sign(value + 1e-9) * 0.5 + value, value)
        return value.astype(_NP[dtype])

    def add(self, scope: _Scope, op: str, inputs: list[str], shape: Sequence[int],
            dtype: int, **attrs: object) -> str:
        out = self.name(op.lower())
        scope.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        scope.own[out] = _Value(tuple(shape), dtype)
        return out

    def pick(self, scope: _Scope, where: Callable[[str, _Value], bool] | None = None) -> str:
        values = scope.visible()
        names = sorted((n for n, v in values.items() if v.dtype != BOOL and (
            where is None or where(n, v))), key=lambda n: (len(n), n))
        return self.draw(st.sampled_from(names))

    # ------------------------------------------------------------ one random node
    def step(self, scope: _Scope) -> None:
        draw = self.draw
        kinds = ["transpose", "transpose", "inverse", "inverse", "unary", "unary", "clip",
                 "cast", "binary_const", "binary_const", "binary_value", "concat", "split",
                 "slice", "reduce", "softmax", "squeeze", "unsqueeze", "pad"]
        if scope.depth < 2:
            kinds.append("if")
        kind = draw(st.sampled_from(kinds))
        src = self.pick(scope)
        value = scope.visible()[src]
        shape, dtype, rank = value.shape, value.dtype, len(value.shape)
        if rank == 0 and kind in ("transpose", "inverse", "concat", "split", "slice", "softmax",
                                  "squeeze", "pad"):
            kind = "unary"
        getattr(self, f"_{kind}")(scope, src, shape, dtype)

    def _transpose(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        perm = tuple(self.draw(st.permutations(range(len(shape)))))
        self.perms.append(perm)
        attrs = {} if perm == tuple(reversed(range(len(shape)))) and self.draw(
            st.booleans()) else {"perm": list(perm)}  # no perm: the axes reversed
        self.add(scope, "Transpose", [src], [shape[p] for p in perm], dtype, **attrs)

    def _inverse(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        rank = len(shape)
        known = [p for p in self.perms if len(p) == rank]
        perm = self.draw(st.sampled_from(known)) if known else tuple(reversed(range(rank)))
        inverse = [0] * rank
        for i, axis in enumerate(perm):
            inverse[axis] = i
        self.add(scope, "Transpose", [src], [shape[p] for p in inverse], dtype, perm=inverse)

    def _unary(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        op = self.draw(st.sampled_from(UNARY))
        attrs = {"alpha": 0.1} if op == "LeakyRelu" else {}
        if op in ("Softsign", "LeakyRelu") and dtype != FLOAT:
            op, attrs = "Relu", {}  # float-only kernels in ONNX Runtime's CPU provider
        self.add(scope, op, [src], shape, dtype, **attrs)

    def _clip(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        low = self.draw(st.sampled_from([-0.5, 0.0, -2.0]))
        high = self.draw(st.sampled_from([0.5, 1.0, 2.0]))
        if self.opset < 11:
            self.add(scope, "Clip", [src], shape, dtype, min=low, max=high)
            return
        if dtype != FLOAT and self.opset < 12:
            self._unary(scope, src, shape, dtype)
            return
        inputs = [src]
        bounds = self.draw(st.sampled_from(["both", "min", "max"]))
        np_type = _NP[dtype]
        inputs.append(self.const(scope, np.array(low, np_type)) if bounds != "max" else "")
        if bounds != "min":
            inputs.append(self.const(scope, np.array(high, np_type)))
        self.add(scope, "Clip", inputs, shape, dtype)

    def _cast(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        to = DOUBLE if dtype == FLOAT else FLOAT
        out = self.add(scope, "Cast", [src], shape, to, to=to)
        if src in self.casts:
            # ONNX Runtime (1.31) removes the pair float -> double -> float even with its
            # optimizations off, but not from the subgraphs that read it: an If body reading
            # the pair's result fails with "Missing Input" on the original model already.
            self.hidden_from_bodies.add(out)
        self.casts.add(out)

    def _broadcast_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts with ``shape``: dims kept, set to 1, grown from 1, or extra
        leading dims; sometimes of lower rank."""
        draw = self.draw
        rank = len(shape)
        k = draw(st.integers(0, min(rank + 1, 4)))
        out = []
        for i in range(k):
            if i < k - rank:
                out.append(draw(st.integers(1, 3)))  # a leading dim the value lacks
                continue
            d = shape[rank - k + i]
            if isinstance(d, str):
                out.append(1)  # a constant cannot follow a symbol's size
            else:
                out.append(draw(st.sampled_from([d, 1] if d > 1 else [1, 1, 2, 3])))
        return tuple(out)

    def _binary_const(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        op = self.draw(st.sampled_from(BINARY))
        cshape = self._broadcast_shape(shape)
        const = self.const(scope, self.floats(cshape, dtype, nonzero=op == "Div"))
        inputs = [src, const]
        if op != "Div" and self.draw(st.booleans()):
            inputs.reverse()
        self.add(scope, op, inputs, _broadcast(shape, cshape), dtype)

    def _binary_value(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        def fits(name: str, v: _Value) -> bool:
            return v.dtype == dtype and _broadcast(shape, v.shape) is not None

        other = self.pick(scope, fits)
        op = self.draw(st.sampled_from(("Add", "Sub", "Mul", "Max", "Min")))
        inputs = [src, other]
        if self.draw(st.booleans()):
            inputs.reverse()
        self.add(scope, op, inputs, _broadcast(shape, scope.visible()[other].shape), dtype)

    def _concat(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        rank = len(shape)
        axis = self.draw(st.integers(-rank, rank - 1))
        a = axis % rank

        def fits(name: str, v: _Value) -> bool:
            return v.dtype == dtype and len(v.shape) == rank and all(
                d == e for i, (d, e) in enumerate(zip(v.shape, shape)) if i != a)

        inputs = [src] + [self.pick(scope, fits) for _ in range(self.draw(st.integers(1, 2)))]
        if self.draw(st.booleans()):
            inputs = inputs[::-1]
        out = list(shape)
        sizes = [scope.visible()[n].shape[a] for n in inputs]
        out[a] = sum(sizes) if all(isinstance(d, int) for d in sizes) else self.name("cat")
        self.add(scope, "Concat", inputs, out, dtype, axis=axis)

    def _split(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        rank = len(shape)
        candidates = [i for i in range(rank) if isinstance(shape[i], int) and shape[i] >= 2]
        if not candidates:
            self._unary(scope, src, shape, dtype)
            return
        a = self.draw(st.sampled_from(candidates))
        axis = a - rank if self.draw(st.booleans()) else a
        first = self.draw(st.integers(1, shape[a] - 1))
        sizes = [first, shape[a] - first]
        inputs, attrs = [src], {"axis": axis}
        style = self.draw(st.sampled_from(["sizes", "equal"]))
        if style == "equal" and shape[a] % 2 == 0:
            sizes = [shape[a] // 2] * 2
            if self.opset >= 18:
                attrs["num_outputs"] = 2
        elif self.opset >= 13:
            inputs.append(self.ints(scope, sizes))
        else:
            attrs["split"] = sizes
        outs = [self.name("split") for _ in sizes]
        scope.nodes.append(helper.make_node("Split", inputs, outs, **attrs))
        for out, size in zip(outs, sizes):
            scope.own[out] = _Value(shape[:a] + (size,) + shape[a + 1:], dtype)

    def _slice(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        draw = self.draw
        rank = len(shape)
        axes = list(draw(st.permutations(range(rank))))[: draw(st.integers(1, rank))]
        starts, ends, steps = [], [], []
        index: list[slice] = [slice(None)] * rank
        for a in axes:
            step = draw(st.sampled_from([1, 1, 1, 2, -1]))
            d = shape[a]
            if isinstance(d, str):  # the whole axis, maybe reversed: the size stays the symbol
                step = draw(st.sampled_from([1, -1]))
                start, end = (0, 2**62) if step > 0 else (-1, -(2**62))
            else:
                start = draw(st.integers(-d, d - 1))
                end = draw(st.sampled_from([draw(st.integers(-d - 1, d)),
                                            2**62 if step > 0 else -(2**62)]))
                index[a] = slice(start, end, step)
            starts.append(start), ends.append(end), steps.append(step)
        static = [d if isinstance(d, int) else 1 for d in shape]
        out = tuple(d if isinstance(d, str) else n
                    for d, n in zip(shape, np.empty(static)[tuple(index)].shape))
        if 0 in out:  # empty slices are legal but leave nothing to compare
            self._unary(scope, src, shape, dtype)
            return
        style = draw(st.sampled_from(["axes", "axes", "implicit"]))
        if style == "implicit" and sorted(axes) == list(range(len(axes))) and all(
                s == 1 for s in steps):
            order = sorted(range(len(axes)), key=lambda i: axes[i])
            inputs = [src, self.ints(scope, [starts[i] for i in order]),
                      self.ints(scope, [ends[i] for i in order])]
        else:
            axes_given = [a - rank if draw(st.booleans()) else a for a in axes]
            inputs = [src, self.ints(scope, starts), self.ints(scope, ends),
                      self.ints(scope, axes_given)]
            if any(s != 1 for s in steps) or draw(st.booleans()):
                inputs.append(self.ints(scope, steps))
        self.add(scope, "Slice", inputs, out, dtype)

    def _reduce(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        draw = self.draw
        op = draw(st.sampled_from(REDUCE))
        rank = len(shape)
        keepdims = draw(st.sampled_from([0, 1]))
        every = rank == 0 or draw(st.integers(0, 5)) == 0
        axes = [] if every else sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1)))
        reduced = set(range(rank)) if every else set(axes)
        out = [1 if i in reduced else d for i, d in enumerate(shape)
               if keepdims or i not in reduced]
        given = [a - rank if draw(st.booleans()) else a for a in axes]
        attrs: dict[str, object] = {"keepdims": keepdims}
        inputs = [src]
        if self.opset >= _REDUCE_AXES_INPUT_FROM.get(op, 18):
            if given:
                inputs.append(self.ints(scope, given))
        elif given:
            attrs["axes"] = given
        self.add(scope, op, inputs, out, dtype, **attrs)

    def _softmax(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        rank = len(shape)
        op = self.draw(st.sampled_from(["Softmax", "Softmax", "LogSoftmax"]))
        attrs = {}
        if self.draw(st.integers(0, 3)) or self.opset < 13 and rank < 2:  # default axis 1
            attrs["axis"] = self.draw(st.integers(-rank, rank - 1))
        self.add(scope, op, [src], shape, dtype, **attrs)

    def _squeeze(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        rank = len(shape)
        ones = [i for i, d in enumerate(shape) if d == 1]
        if not ones:
            self._unsqueeze(scope, src, shape, dtype)
            return
        if all(isinstance(d, int) for d in shape) and self.draw(st.integers(0, 3)) == 0:
            # No axes: every size-1 dim (not with symbols, which may be 1 at run time).
            self.add(scope, "Squeeze", [src], [d for d in shape if d != 1], dtype)
            return
        axes = sorted(self.draw(st.sets(st.sampled_from(ones), min_size=1)))
        out = [d for i, d in enumerate(shape) if i not in axes]
        given = [a - rank if self.draw(st.booleans()) else a for a in axes]
        if self.opset >= 13:
            self.add(scope, "Squeeze", [src, self.ints(scope, given)], out, dtype)
        else:
            self.add(scope, "Squeeze", [src], out, dtype, axes=given)

    def _unsqueeze(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        rank = len(shape)
        if rank >= 5:
            self._unary(scope, src, shape, dtype)
            return
        count = self.draw(st.integers(1, 2 if rank <= 3 else 1))
        out_rank = rank + count
        axes = sorted(self.draw(st.sets(st.integers(0, out_rank - 1), min_size=count,
                                        max_size=count)))
        out: list[int] = []
        rest = iter(shape)
        for i in range(out_rank):
            out.append(1 if i in axes else next(rest))
        given = [a - out_rank if self.draw(st.booleans()) else a for a in axes]
        if self.opset >= 13:
            self.add(scope, "Unsqueeze", [src, self.ints(scope, given)], out, dtype)
        else:
            self.add(scope, "Unsqueeze", [src], out, dtype, axes=given)

    def _pad(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        rank = len(shape)
        pads = list(self.draw(st.lists(st.integers(0, 1), min_size=2 * rank,
                                       max_size=2 * rank)))
        out = [d + pads[i] + pads[rank + i] if isinstance(d, int)
               else d if pads[i] + pads[rank + i] == 0 else self.name("pad")
               for i, d in enumerate(shape)]
        self.add(scope, "Pad", [src, self.ints(scope, pads)], out, dtype)

    # ------------------------------------------------------------ If with outer-scope reads
    def _condition(self, scope: _Scope) -> str:
        kind = self.draw(st.sampled_from(["input", "constant", "computed", "computed"]))
        if kind == "input":
            if self.cond_input is None:
                self.cond_input = self.name("cond")
            return self.cond_input
        if kind == "constant":
            return self.const(scope, np.array(self.draw(st.booleans())), "flag")
        src = self.pick(scope)
        value = scope.visible()[src]
        # ReduceMax is exact whatever the order, so the branch taken cannot depend on rounding.
        peak = self.add(scope, "ReduceMax", [src], [], value.dtype, keepdims=0)
        threshold = self.const(scope, np.array(self.draw(st.sampled_from([0.0, 0.5, 1.0])),
                                               _NP[value.dtype]))
        return self.add(scope, "Greater", [peak, threshold], [], BOOL)

    def _if(self, scope: _Scope, src: str, shape: tuple[int, ...], dtype: int) -> None:
        cond = self._condition(scope)

        def readable(name: str, value: _Value) -> bool:
            return name not in self.hidden_from_bodies

        # The branches' outputs take the types of values of the enclosing graph: src and maybe
        # another one.
        templates = [src if readable(src, scope.visible()[src]) else self.pick(scope, readable)]
        if self.draw(st.booleans()):
            templates.append(self.pick(scope, readable))
        specs = [scope.visible()[t] for t in templates]
        branches = [self._branch(scope, templates, specs, label) for label in ("then", "else")]
        outs = [self.name("if") for _ in templates]
        scope.nodes.append(helper.make_node(
            "If", [cond], outs, then_branch=branches[0], else_branch=branches[1]))
        for out, spec in zip(outs, specs):
            scope.own[out] = _Value(spec.shape, spec.dtype)

    def _branch(self, scope: _Scope, templates: list[str], specs: list[_Value],
                label: str) -> onnx.GraphProto:
        body = _Scope(scope)
        for name in self.hidden_from_bodies:
            body.outer.pop(name, None)
        for _ in range(self.draw(st.integers(0, 4))):
            self.step(body)
        outputs: list[str] = []
        for template, spec in zip(templates, specs):
            same = sorted((n for n, v in body.own.items() if v == spec and n not in outputs),
                          key=lambda n: (len(n), n))
            permuted = sorted((n for n, v in body.own.items() if v.dtype == spec.dtype
                               and len(v.shape) == len(spec.shape) and v.shape != spec.shape
                               and sorted(map(str, v.shape)) == sorted(map(str, spec.shape))),
                              key=lambda n: (len(n), n))
            choice = self.draw(st.sampled_from(["same", "permuted", "outer"]))
            if choice == "same" and same:
                outputs.append(self.draw(st.sampled_from(same)))
            elif choice == "permuted" and permuted:
                name = self.draw(st.sampled_from(permuted))
                shape = body.own[name].shape
                # A permutation that maps this value's shape onto the template's.
                used: set[int] = set()
                perm = []
                for d in spec.shape:
                    axis = next(i for i, e in enumerate(shape) if e == d and i not in used)
                    used.add(axis)
                    perm.append(axis)
                outputs.append(self.add(body, "Transpose", [name], spec.shape, spec.dtype,
                                        perm=perm))
            else:  # the enclosing graph's value itself, through a node of the body
                op = "Relu" if spec.dtype == FLOAT else "Neg"
                outputs.append(self.add(body, self.draw(st.sampled_from([op, "Identity"])),
                                        [template], spec.shape, spec.dtype))
        return helper.make_graph(
            body.nodes, self.name(label), [],
            [helper.make_tensor_value_info(o, body.own[o].dtype, body.own[o].shape)
             for o in outputs],
            body.inits,
        )


@st.composite
def random_models(draw: Draw, *, max_steps: int = 14) -> onnx.ModelProto:
    """A valid ONNX model (checked with ``full_check``) of random layout-agnostic ops."""
    opset = draw(st.sampled_from([11, 13, 17, 18, 21]))
    builder = _Builder(draw, opset)
    main = builder.main
    inputs = []
    # Symbols: a batch dimension "N" shared by the inputs, or one free dimension "S".
    symbols = draw(st.sampled_from([(), (), ("N",), ("S",), ("N", "S")]))
    for index in range(draw(st.integers(1, 2))):
        rank = draw(st.integers(1, 4))
        dims = st.integers(1, 4) | st.sampled_from(symbols) if symbols else st.integers(1, 4)
        shape = tuple(draw(st.lists(dims, min_size=rank, max_size=rank)))
        name = "x" if index == 0 else "y"
        main.own[name] = _Value(shape, FLOAT)
        inputs.append(helper.make_tensor_value_info(name, FLOAT, shape))
    for _ in range(draw(st.integers(1, max_steps))):
        builder.step(main)
    produced = [o for n in main.nodes for o in n.output if o in main.own
                and main.own[o].dtype != BOOL]
    last = next(o for n in reversed(main.nodes) for o in n.output if o in produced)
    outputs = sorted(set(draw(st.lists(st.sampled_from(produced), min_size=0, max_size=3)))
                     | {last}, key=lambda n: (len(n), n))
    if builder.cond_input is not None:
        inputs.append(helper.make_tensor_value_info(builder.cond_input, BOOL, []))
    if draw(st.integers(0, 4)) == 0:  # initializers listed as inputs, as IR 3 exporters did
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                   for t in main.inits]
    graph = helper.make_graph(
        main.nodes, "random", inputs,
        [helper.make_tensor_value_info(o, main.own[o].dtype, main.own[o].shape) for o in outputs],
        main.inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10 if opset >= 21 else 8
    onnx.checker.check_model(model, full_check=True)
    return model


# --------------------------------------------------------------------------------------------
# The check


def signature(model: onnx.ModelProto) -> tuple[list[tuple], list[tuple]]:
    """Graph inputs a caller feeds, and graph outputs: (name, dtype, dims) each."""
    initializers = {t.name for t in model.graph.initializer}

    def spec(value: onnx.ValueInfoProto) -> tuple:
        tensor = value.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else d.dim_param
                     for d in tensor.shape.dim) if tensor.HasField("shape") else None
        return value.name, tensor.elem_type, dims

    return ([spec(v) for v in model.graph.input if v.name not in initializers],
            [spec(v) for v in model.graph.output])


def check_pipeline(model: onnx.ModelProto, passes: Sequence[str] | None) -> onnx.ModelProto:
    """Optimize ``model`` with ``passes`` (None: the default pipeline) through
    ``graphfix.optimize``, which raises ParityError when the result computes something else;
    then check the signature and ONNX's checker. Returns the optimized model."""
    before = onnx.ModelProto()
    before.CopyFrom(model)
    result = graphfix.optimize(model, passes=passes)
    assert model == before, "optimize changed the model it was given"
    optimized = result.model
    assert signature(optimized) == signature(model)
    onnx.checker.check_model(optimized, full_check=True)
    return optimized


