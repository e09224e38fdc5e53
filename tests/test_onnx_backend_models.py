"""graphfix on the onnx package's backend test models: never wrong, never a crash.

The `simple` suite runs by default; the whole set (pytorch-converted, pytorch-operator, light)
runs with ``pytest -m slow``.
"""

from __future__ import annotations

import pytest

from graphfix.models.onnx_backend import SUITES, cases, check

FAST_SUITES = ("simple",)


def _params(suites):
    return [
        pytest.param(case, id=f"{case[0]}/{case[1]}",
                     marks=() if case[0] in FAST_SUITES else pytest.mark.slow)
        for case in cases(suites)
    ]


@pytest.mark.parametrize("case", _params(SUITES))
def test_optimized_model_is_right_or_cleanly_refused(case, tmp_path):
    suite, name, path, sets = case
    outcome = check(suite, name, path, sets, tmp_path)
    assert outcome.status in ("pass", "refused"), outcome.detail
