"""Symbolic integer expressions: polynomials over symbols that stand for sizes.

A size the model does not fix is a symbol (every symbol is >= 0); what shape arithmetic
computes from sizes (``batch * seq``, ``hidden / heads``) is a polynomial with integer
coefficients over them, compared exactly.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Optional, Union

__all__ = ["Expr", "Element", "Shape", "Value", "product"]


@dataclasses.dataclass(frozen=True)
class Expr:
    """``sum(coefficient * product(symbols))``; terms sorted, no zero coefficient."""

    terms: tuple[tuple[tuple[str, ...], int], ...] = ()

    @staticmethod
    def of(value: int | str) -> Expr:
        if isinstance(value, str):
            return Expr(((( value,), 1),))
        return Expr(((((), int(value)),)) if value else ())

    @staticmethod
    def _make(terms: dict[tuple[str, ...], int]) -> Expr:
        return Expr(tuple(sorted((m, c) for m, c in terms.items() if c)))

    @property
    def constant(self) -> int | None:
        """The integer this is, or None when it depends on a symbol."""
        if not self.terms:
            return 0
        if len(self.terms) == 1 and not self.terms[0][0]:
            return self.terms[0][1]
        return None

    @property
    def nonnegative(self) -> bool:
        """Provably >= 0: every coefficient is (symbols are sizes)."""
        return all(c >= 0 for _, c in self.terms)

    def __add__(self, other: Expr) -> Expr:
        terms = dict(self.terms)
        for m, c in other.terms:
            terms[m] = terms.get(m, 0) + c
        return Expr._make(terms)

    def __neg__(self) -> Expr:
        return Expr(tuple((m, -c) for m, c in self.terms))

    def __sub__(self, other: Expr) -> Expr:
        return self + (-other)

    def __mul__(self, other: Expr) -> Expr:
        terms: dict[tuple[str, ...], int] = {}
        for (m1, c1), (m2, c2) in itertools.product(self.terms, other.terms):
            m = tuple(sorted(m1 + m2))
            terms[m] = terms.get(m, 0) + c1 * c2
        return Expr._make(terms)

    def divide(self, other: Expr) -> Expr | None:
        """``self / other`` when ``other`` is one term dividing every term of ``self``."""
        if len(other.terms) != 1:
            return None
        (dm, dc), = other.terms
        if dc == 0:
            return None
        terms: dict[tuple[str, ...], int] = {}
        for m, c in self.terms:
            rest = list(m)
            for symbol in dm:
                if symbol not in rest:
                    return None
                rest.remove(symbol)
            if c % dc:
                return None
            terms[tuple(rest)] = c // dc
        return Expr._make(terms)

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        return " + ".join(("*".join([str(c)] * (c != 1 or not m) + list(m))) for m, c in self.terms)


Element = Union[Expr, bool, None]
Shape = Optional[tuple[Expr, ...]]
Value = Optional[tuple[Element, ...]]


def product(dims: Sequence[Expr]) -> Expr:
    out = Expr.of(1)
    for d in dims:
        out = out * d
    return out
