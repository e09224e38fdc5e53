"""A small graph builder shared by the model builders: named nodes, seeded initializers.

Every builder in this package is deterministic: weights come from a seeded numpy generator and
names from a counter, so the same options give the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["GraphBuilder", "TO_NCHW", "TO_NHWC", "float_input"]

TO_NCHW: list[int] = [0, 3, 1, 2]
TO_NHWC: list[int] = [0, 2, 3, 1]


class GraphBuilder:
    """Accumulates nodes and initializers with unique names and seeded weights."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counts: dict[str, int] = {}

    def name(self, prefix: str) -> str:
        n = self._counts.get(prefix, 0)
        self._counts[prefix] = n + 1
        return f"{prefix}_{n}"

    def const(self, prefix: str, array: np.ndarray) -> str:
        name = self.name(prefix)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, prefix: str, shape: Sequence[int], fan_in: int) -> str:
        scale = np.float32(np.sqrt(2.0 / max(fan_in, 1)))
        data = self.rng.standard_normal(tuple(shape), dtype=np.float32) * scale
        return self.const(prefix, data.astype(np.float32))

    def op(
        self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs: object
    ) -> str | list[str]:
        base = self.name(op_type)
        outs = [base] if n_out == 1 else [f"{base}:{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=base, **attrs))
        return outs[0] if n_out == 1 else outs

    def op1(self, op_type: str, inputs: Sequence[str], **attrs: object) -> str:
        out = self.op(op_type, inputs, 1, **attrs)
        assert isinstance(out, str)
        return out

    def model(
        self,
        graph_name: str,
        inputs: Sequence[onnx.ValueInfoProto],
        outputs: Sequence[onnx.ValueInfoProto],
        *,
        opset: int,
        ir_version: int,
        producer: str = "graphfix-models",
    ) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, graph_name, list(inputs), list(outputs), self.initializers
        )
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", opset)], producer_name=producer
        )
        model.ir_version = ir_version
        return model


def float_input(name: str, shape: Sequence[int | str | None]) -> onnx.ValueInfoProto:
    """A float32 value info; ``None`` leaves a dimension unnamed."""
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))
