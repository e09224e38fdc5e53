"""Messages built from hostile text: paths with newlines or odd characters, ONNX Runtime's
C++ signatures and long sentences. Every error stays one line and keeps its reason."""

from __future__ import annotations

import pytest

from graphfix.errors import ModelLoadError, first_line, shown

ORT_OPSET = (
    "[ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/onnxruntime/core/graph/model_load_utils"
    ".h:46 void onnxruntime::model_load_utils::ValidateOpsetForDomain(const std::unordered_map"
    "<std::__cxx11::basic_string<char>, int>&, const onnxruntime::logging::Logger&, bool, const"
    " std::string&, int) ONNX Runtime only *guarantees* support for models stamped with official"
    " released onnx opset versions. Opset 99 is under development and support for this is "
    "limited. The operator schemas and or other functionality may change before next ONNX "
    "release and in this case ONNX Runtime will not guarantee backward compatibility. Current "
    "official support for domain ai.onnx is till opset 26.\n")
ORT_CONST = (
    "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : /onnxruntime_src/onnxruntime/core/framework/"
    "tensorprotoutils.cc:1234 onnxruntime::common::Status onnxruntime::utils::GetExtDataFromTensor"
    "Proto(const onnxruntime::Env&, const std::filesystem::path&, const onnx::TensorProto&, "
    "void*&, size_t&) const External data size mismatch. Computed size: 1024, "
    "external_data.length: 2048")


def test_first_line_drops_the_status_and_the_cpp_signature():
    assert first_line(RuntimeError(ORT_OPSET)).startswith("ONNX Runtime only *guarantees*")
    assert first_line(RuntimeError(ORT_OPSET)).endswith("till opset 26.")
    assert first_line(RuntimeError(ORT_CONST)) == (
        "External data size mismatch. Computed size: 1024, external_data.length: 2048")


def test_first_line_keeps_a_plain_message_and_cuts_long_ones_at_a_word():
    assert first_line(ValueError("plain words\nsecond line")) == "plain words"
    assert first_line(ValueError("a.cc:12 happened")) == "happened"
    long = first_line(ValueError("word " * 300))
    assert len(long) <= 500 and long.endswith("word...")
    assert first_line(ValueError("")) == "ValueError"


@pytest.mark.parametrize("path, expected", [
    ("model.onnx", "model.onnx"), ("my model.onnx", "my model.onnx"),
    ("bad\nname.onnx", "'bad\\nname.onnx'"), (" lead.onnx", "' lead.onnx'"),
    ("tab\there", "'tab\\there'"), ("", "''"),
])
def test_shown_quotes_only_paths_that_would_not_print_plainly(path, expected):
    assert shown(path) == expected


def test_an_error_is_one_line_whatever_it_holds():
    err = ModelLoadError("a\nb\rc", hint="d\u2028e")
    assert "\n" not in str(err) and "\r" not in str(err) and "\u2028" not in str(err)
    assert str(err) == "a\\nb\\rc (hint: d\\u2028e)"
