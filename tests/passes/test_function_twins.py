"""Every pass's function twin takes the pass's options as typed keyword-only arguments, with the
pass's defaults: no ``**options`` to hide a misspelt name until the pass is built."""

from __future__ import annotations

import inspect

import pytest

import graphfix.passes
from graphfix import registry

_TWINS = {name: getattr(graphfix.passes, name.replace("-", "_")) for name in registry.names()}


@pytest.mark.parametrize("name", sorted(_TWINS))
def test_twin_takes_the_pass_options_as_typed_keywords(name: str) -> None:
    twin = inspect.signature(_TWINS[name])
    options = inspect.signature(registry.get(name).__init__)
    kinds = [p.kind for p in twin.parameters.values()]
    assert inspect.Parameter.VAR_KEYWORD not in kinds
    assert inspect.Parameter.VAR_POSITIONAL not in kinds
    first, *rest = twin.parameters.values()
    assert first.name == "model" and all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in rest)
    mine = {p.name: (p.default, p.annotation) for p in rest}
    its = {p.name: (p.default, p.annotation) for p in options.parameters.values()
           if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert mine == its

