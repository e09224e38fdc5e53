"""The permutation algebra (:mod:`graphfix.passes.eliminate_transposes.perm`), against numpy's
transposes of random arrays. ``T(p)`` is ``Transpose`` with ``perm = p``, numpy's
``x.transpose(p)``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from graphfix.passes.eliminate_transposes.perm import (
    compose,
    grow,
    invert,
    is_identity,
    moves_only_ones,
    normalize_axes,
    per_axis,
    permute_pads,
    shrink,
    transposed_shape,
    untransposed_shape,
)

SETTINGS = settings(max_examples=30, deadline=None, derandomize=True)


@st.composite
def perms(draw, min_rank: int = 1, max_rank: int = 5, rank: int | None = None):
    size = rank if rank is not None else draw(st.integers(min_rank, max_rank))
    return tuple(draw(st.permutations(range(size))))


@st.composite
def arrays(draw, min_rank: int = 1, max_rank: int = 5, ones: bool = False):
    """An array of distinct values (so that equal arrays are the same elements in the same
    places); ``ones`` makes size-1 axes likely."""
    rank = draw(st.integers(min_rank, max_rank))
    sizes = st.sampled_from([1, 1, 2, 3]) if ones else st.integers(1, 3)
    shape = tuple(draw(st.lists(sizes, min_size=rank, max_size=rank)))
    return np.arange(int(np.prod(shape))).reshape(shape)


@st.composite
def array_and_perm(draw, min_rank: int = 1, ones: bool = False):
    x = draw(arrays(min_rank=min_rank, ones=ones))
    return x, draw(perms(rank=x.ndim))


# ------------------------------------------------------------------ invert and compose
@SETTINGS
@given(perms())
def test_invert_is_an_involution_and_composes_to_the_identity(p):
    assert invert(invert(p)) == p
    assert is_identity(compose(p, invert(p)))
    assert is_identity(compose(invert(p), p))


@SETTINGS
@given(st.integers(1, 5).flatmap(lambda r: st.tuples(perms(rank=r), perms(rank=r), perms(rank=r))))
def test_compose_is_associative_and_inverts_in_reverse_order(triple):
    a, b, c = triple
    assert compose(compose(a, b), c) == compose(a, compose(b, c))
    assert invert(compose(a, b)) == compose(invert(b), invert(a))
    assert compose(a, tuple(range(len(a)))) == a == compose(tuple(range(len(a))), a)


@SETTINGS
@given(arrays().flatmap(lambda x: st.tuples(st.just(x), perms(rank=x.ndim), perms(rank=x.ndim))))
def test_compose_is_two_numpy_transposes(case):
    x, inner, outer = case
    # T(outer)(T(inner)(x)) == T(compose(inner, outer))(x)
    np.testing.assert_array_equal(x.transpose(inner).transpose(outer),
                                  x.transpose(compose(inner, outer)))
    np.testing.assert_array_equal(x.transpose(inner).transpose(invert(inner)), x)


@SETTINGS
@given(array_and_perm())
def test_shapes_against_numpy(case):
    x, p = case
    assert transposed_shape(x.shape, p) == x.transpose(p).shape
    assert untransposed_shape(x.transpose(p).shape, p) == x.shape
    if is_identity(p):
        np.testing.assert_array_equal(x.transpose(p), x)


# ------------------------------------------------------------------ shrink and grow
def _take_first(x: np.ndarray, axes) -> np.ndarray:
    """Drop ``axes`` by taking their first element (what a Squeeze or keepdims=0 does to the
    axes' layout)."""
    return x[tuple(0 if i in axes else slice(None) for i in range(x.ndim))]


@SETTINGS
@given(array_and_perm().flatmap(lambda c: st.tuples(
    st.just(c[0]), st.just(c[1]), st.sets(st.integers(0, c[0].ndim - 1), max_size=c[0].ndim - 1))))
def test_shrink_is_the_permutation_left_after_dropping_axes(case):
    x, p, removed = case
    # Dropping ``removed`` (transposed layout) after T(p) is dropping p[removed] before it and
    # transposing by shrink(p, removed).
    after = _take_first(x.transpose(p), removed)
    before = _take_first(x, {p[i] for i in removed})
    np.testing.assert_array_equal(after, before.transpose(shrink(p, removed)))


@st.composite
def insertions(draw):
    """An array, a permutation, and 0-2 positions of new axes in the output."""
    x, p = draw(array_and_perm())
    count = draw(st.integers(0, 2))
    inserted = draw(st.sets(st.integers(0, x.ndim + count - 1), min_size=count, max_size=count))
    return x, p, inserted


@SETTINGS
@given(insertions())
def test_grow_keeps_the_new_axes_in_place(case):
    x, p, inserted = case
    # Unsqueeze at ``inserted`` after T(p) is Unsqueeze at ``inserted`` then T(grow(p, ...)).
    after = np.expand_dims(x.transpose(p), sorted(inserted)) if inserted else x.transpose(p)
    unsqueezed = np.expand_dims(x, sorted(inserted)) if inserted else x
    np.testing.assert_array_equal(after, unsqueezed.transpose(grow(p, inserted)))


@SETTINGS
@given(array_and_perm())
def test_shrink_undoes_grow(case):
    _, p = case
    inserted = {0, len(p) + 1}
    assert shrink(grow(p, inserted), inserted) == p


# ------------------------------------------------------------------ per-axis values
@SETTINGS
@given(array_and_perm().flatmap(lambda c: st.tuples(
    st.just(c[0]), st.just(c[1]),
    st.lists(st.integers(1, 3), min_size=c[0].ndim, max_size=c[0].ndim))))
def test_per_axis_against_numpy_tile(case):
    # Tile(T(p)(x), r) == T(p)(Tile(x, per_axis(r, p))): Tile's repeats, Resize's scales
    x, p, repeats = case
    np.testing.assert_array_equal(np.tile(x.transpose(p), repeats),
                                  np.tile(x, per_axis(repeats, p)).transpose(p))


@SETTINGS
@given(array_and_perm())
def test_per_axis_indices_gather_the_values(case):
    # The indices per_axis gives of a range reorder any values at run time as it does.
    _, p = case
    values = [10 * i + 1 for i in range(2 * len(p))]
    indices = per_axis(range(2 * len(p)), p, 2)
    assert [values[i] for i in indices] == per_axis(values, p, 2) == permute_pads(values, p)


# ------------------------------------------------------------------ pads, axes, size-1 moves
@SETTINGS
@given(array_and_perm().flatmap(lambda c: st.tuples(
    st.just(c[0]), st.just(c[1]),
    st.lists(st.integers(0, 2), min_size=2 * c[0].ndim, max_size=2 * c[0].ndim))))
def test_permute_pads_against_numpy(case):
    x, p, pads = case
    rank = x.ndim

    def pad(a: np.ndarray, onnx_pads) -> np.ndarray:
        return np.pad(a, [(onnx_pads[i], onnx_pads[rank + i]) for i in range(rank)])

    # Pad(T(p)(x), pads) == T(p)(Pad(x, permute_pads(pads, p)))
    np.testing.assert_array_equal(pad(x.transpose(p), pads),
                                  pad(x, permute_pads(pads, p)).transpose(p))


@SETTINGS
@given(st.integers(1, 5).flatmap(lambda rank: st.tuples(
    st.just(rank), st.lists(st.integers(-rank - 1, rank), max_size=rank + 1))))
def test_normalize_axes_against_numpy(case):
    rank, axes = case
    result = normalize_axes(axes, rank)
    valid = all(-rank <= a < rank for a in axes)
    normalized = [a + rank if a < 0 else a for a in axes]
    if not valid or len(set(normalized)) != len(normalized):
        assert result is None
    else:
        assert result == [a % rank for a in axes]


@settings(max_examples=100, deadline=None, derandomize=True)
@given(array_and_perm(ones=True))
def test_moves_only_ones_against_numpy(case):
    x, p = case
    moved = x.transpose(p)
    # A Transpose that moves only size-1 axes keeps every element where a Reshape puts it.
    as_reshape = np.array_equal(moved.reshape(-1), x.reshape(-1))
    assert moves_only_ones(moved.shape, p) == as_reshape
    if moves_only_ones(moved.shape, p):
        np.testing.assert_array_equal(x.reshape(moved.shape), moved)
