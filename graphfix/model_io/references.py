"""Which models beside a data file refer to it.

A data file graphfix names itself (``out.onnx.data`` beside ``out.onnx``) may be the external
data of other models too: a copy of ``out.onnx`` kept as a backup, a model saved earlier under
another name. :func:`referrers` finds them: every other file in the data file's folder that is
laid out as an ONNX model (its top-level protobuf fields walk to its end and include a graph) and
whose bytes hold the data file's name. Any spelling of the location (``./out.onnx.data``,
``sub/../out.onnx.data``) holds the name, so the search errs on the side of finding a referrer.
Files are mapped, not read whole: a data file is ruled out after a few bytes.
"""

from __future__ import annotations

import dataclasses
import logging
import mmap
import os
import stat
from collections.abc import Collection
from pathlib import Path

from graphfix.errors import shown

__all__ = ["referrers", "refers", "Referrers"]

logger = logging.getLogger(__name__)

# ModelProto's graph field (7) with the length-delimited wire type.
_GRAPH_TAG = 7 << 3 | 2
# Past this many top-level fields a file is taken for a model without looking further.
_MAX_FIELDS = 4096


@dataclasses.dataclass
class Referrers:
    """The files that refer to a data file, and those that could not be read, so that nothing
    can be said of them."""

    found: list[Path] = dataclasses.field(default_factory=list)
    unreadable: list[Path] = dataclasses.field(default_factory=list)

    @property
    def none(self) -> bool:
        """No file refers to it, and every file could be read."""
        return not self.found and not self.unreadable

    def describe(self) -> str:
        """The first referrer (or unreadable file) for a message."""
        if self.found:
            more = f" (and {len(self.found) - 1} more)" if len(self.found) > 1 else ""
            return f"{shown(self.found[0])}{more} refers to it"
        return f"{shown(self.unreadable[0])} cannot be read to tell whether it refers to it"


def _varint(data: mmap.mmap | bytes, position: int, end: int) -> tuple[int, int] | None:
    value, shift = 0, 0
    while position < end and shift < 64:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
    return None


def _laid_out_as_model(data: mmap.mmap, size: int) -> bool:
    """Whether the top-level fields of ``data`` walk to its end as a protobuf message does, one
    of them a length-delimited field 7 (ModelProto's graph)."""
    position, fields, graph = 0, 0, False
    while position < size:
        if fields >= _MAX_FIELDS:
            return True
        tag = _varint(data, position, size)
        if tag is None or tag[0] >> 3 == 0:
            return False
        key, position = tag
        kind = key & 7
        if kind == 0:
            found = _varint(data, position, size)
            if found is None:
                return False
            position = found[1]
        elif kind == 1:
            position += 8
        elif kind == 5:
            position += 4
        elif kind == 2:
            found = _varint(data, position, size)
            if found is None:
                return False
            length, position = found
            position += length
            graph = graph or key == _GRAPH_TAG
        else:
            return False
        fields += 1
    return position == size and graph


def _refers(path: Path, name: bytes) -> bool | None:
    """Whether the file at ``path`` is laid out as a model that holds ``name``; None when it
    cannot be read."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return False
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _laid_out_as_model(data, size) and data.find(name) >= 0
    except (OSError, ValueError) as err:
        logger.debug("cannot read %s to see whether it refers to %s: %s", path, name, err)
        return None


def refers(model: Path, data_file: Path) -> bool:
    """Whether the file at ``model`` is laid out as an ONNX model that holds ``data_file``'s
    name (False when it cannot be read)."""
    return bool(_refers(model, os.fsencode(data_file.name)))


def referrers(data_file: Path, *, besides: Collection[Path] = ()) -> Referrers:
    """The files in ``data_file``'s folder, other than ``data_file`` itself and ``besides``
    (compared by identity), that are laid out as ONNX models and hold ``data_file``'s name. A
    file of ``besides`` with other names (hard links) outlives its replacement under them: it
    counts as a referrer when it refers."""
    folder = data_file.parent
    name = os.fsencode(data_file.name)
    left_out = set()
    for path in [data_file, *besides]:
        try:
            info = os.stat(path)
        except OSError:
            continue
        if path == data_file or info.st_nlink == 1:
            left_out.add((info.st_dev, info.st_ino))
    found = Referrers()
    try:
        entries = list(os.scandir(folder))
    except OSError as err:
        logger.debug("cannot list %s: %s", folder, err)
        found.unreadable.append(folder)
        return found
    for entry in entries:
        try:
            info = entry.stat()  # links followed: a link to a model refers as the model does
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) in left_out:
            continue
        verdict = _refers(Path(entry.path), name)
        if verdict is None:
            found.unreadable.append(Path(entry.path))
        elif verdict:
            found.found.append(Path(entry.path))
    return found
