"""Models exported by torch.onnx, for the peer comparison and tools (needs the ``tools`` extra).

torch and transformers are imported inside each function, so importing this module is free.
Both exports use the classic TorchScript exporter (``dynamo=False``), which needs neither
onnxscript nor onnx-ir; that is what most deployed BERT and CNN ONNX files were made with.

- :func:`export_bert_like`: ``transformers.BertModel`` from a ``BertConfig`` with random weights
  (no download), dynamic batch and sequence axes on ``input_ids``, ``attention_mask``,
  ``token_type_ids`` and both outputs. ``bert_base_config=True`` gives BERT-base's shape
  (12 layers, hidden 768, 12 heads, vocabulary 30522).
- :func:`export_small_cnn`: a small NCHW CNN (Conv, BatchNorm, ReLU, MaxPool, global average
  pooling, Linear), the clean-exporter counterpart to the converter-style NHWC models.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["export_bert_like", "export_small_cnn"]


def export_bert_like(
    path: str | os.PathLike[str],
    *,
    layers: int = 2,
    hidden: int = 128,
    heads: int = 4,
    vocab: int = 1000,
    bert_base_config: bool = False,
    seed: int = 0,
    opset: int = 17,
) -> Path:
    """Export a randomly initialised BERT encoder to ``path``; return the path."""
    import torch
    from transformers import BertConfig, BertModel

    if bert_base_config:
        layers, hidden, heads, vocab = 12, 768, 12, 30522
    config = BertConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=512,
    )
    torch.manual_seed(seed)
    bert = BertModel(config).eval()

    class _Positional(torch.nn.Module):
        """Keyword call with a tuple result: BertModel.forward's positional order varies."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> tuple[torch.Tensor, torch.Tensor]:
            out = self.bert(
                input_ids=input_ids, attention_mask=attention_mask,
                token_type_ids=token_type_ids, return_dict=True,
            )
            return out.last_hidden_state, out.pooler_output

    model = _Positional().eval()
    batch, seq = 2, 16
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(0, vocab, (batch, seq), generator=generator)
    attention_mask = torch.ones(batch, seq, dtype=torch.int64)
    token_type_ids = torch.zeros(batch, seq, dtype=torch.int64)
    axes = {0: "batch", 1: "sequence"}
    path = Path(path)
    with torch.no_grad():
        torch.onnx.export(
            model,
            (input_ids, attention_mask, token_type_ids),
            str(path),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state", "pooler_output"],
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "token_type_ids": axes,
                "last_hidden_state": axes,
                "pooler_output": {0: "batch"},
            },
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
    return path


def export_small_cnn(path: str | os.PathLike[str], *, seed: int = 0, opset: int = 17) -> Path:
    """Export a small NCHW CNN (input ``input`` [N, 3, 32, 32], output ``logits`` [N, 10])."""
    import torch
    from torch import nn

    torch.manual_seed(seed)

    def block(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()
        )

    model = nn.Sequential(
        block(3, 16), nn.MaxPool2d(2), block(16, 32), nn.MaxPool2d(2), block(32, 64),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
    ).eval()
    # Non-trivial BN statistics, so a fold of BN into Conv is visible in parity checks.
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(seed))
    path = Path(path)
    with torch.no_grad():
        torch.onnx.export(
            model, (x,), str(path), input_names=["input"], output_names=["logits"],
            dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, opset_version=opset,
            dynamo=False,
        )
    return path
