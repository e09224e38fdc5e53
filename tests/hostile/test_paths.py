"""Hostile paths and links: missing, unreadable, looping, odd or too long names, links that make
two paths one file, outputs where nothing can be written.

Cases (65): a missing input x4 commands, input is a folder x3, an unreadable input x2 (skipped
where permissions do not bind: root), a symlink loop x3, a link to itself, a dangling link, a
symlink input, a symlink to a model whose data lies beside the target, model and data linked
side by side into another folder (a Hugging Face cache), one file through two spellings x6 (two
links, a folder link, ./, sub/.., absolute, hard links), an output in a missing folder, in a
read-only folder (refused before the passes; skipped likewise), in a folder that refuses
files whatever its permissions x2 (/proc, as optimize and tune outputs), in a folder that is a link loop,
an output that is a folder, an empty output, outputs naming a folder x4 (".", "..", "sub/.",
"sub/"), an output and a report with a trailing slash, an empty input, names with spaces and
unicode x2, a newline in an input and in an output name, leading dashes after ``--`` and without
it, a 255-byte input name, a 255-byte output name (with and without external data), a 245-byte
output name, names over NAME_MAX, an input path and an output path over PATH_MAX, the output is
the input's data file through ``sub/..`` and through a link, the report is the input's data
file, the output is the --inputs file, relative paths from another folder, absolute paths, paths
through ``..``, a FIFO input, /dev/null and /dev/zero as input, a sparse model file over 2 GiB,
an output folder reached through a link, a dangling-link output, ``check`` of a file against
itself, ``check`` with a missing candidate. """

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest


def _other_args(command: str, path: str) -> list[str]:
    """The command line of ``command`` reading ``path`` (the other model, if any, is m.onnx)."""
    return {"optimize": ["optimize", path, "out.onnx"],
            "inspect": ["inspect", path],
            "check": ["check", "m.onnx", path],
            "bench": ["bench", path, "--runs", "1", "--warmup", "0"]}[command]


# --------------------------------------------------------------------------- inputs
@pytest.mark.parametrize("command", ["optimize", "inspect", "check", "bench"])
def test_missing_input(gf, command):
    gf.model()
    gf.refused(*_other_args(command, "missing.onnx"), match="missing.onnx")


@pytest.mark.parametrize("command", ["optimize", "inspect", "check"])
def test_input_is_a_folder(gf, command):
    gf.model()
    (gf.folder / "dir.onnx").mkdir()
    gf.refused(*_other_args(command, "dir.onnx"), match="director|folder")


@pytest.mark.parametrize("command", ["optimize", "inspect"])
def test_unreadable_input(gf, command, is_root):
    if is_root:
        pytest.skip("root reads a chmod 000 file")
    path = gf.model()
    path.chmod(0)
    try:
        gf.refused(*_other_args(command, "m.onnx"), match="m.onnx")
    finally:
        path.chmod(0o644)


@pytest.mark.parametrize("command", ["optimize", "inspect", "check"])
def test_symlink_loop(gf, command):
    gf.model()
    os.symlink("loop2.onnx", gf.folder / "loop1.onnx")
    os.symlink("loop1.onnx", gf.folder / "loop2.onnx")
    gf.refused(*_other_args(command, "loop1.onnx"), match="loop1.onnx: a loop of symbolic links")


def test_symlink_to_itself(gf):
    os.symlink("self.onnx", gf.folder / "self.onnx")
    gf.refused("optimize", "self.onnx", "out.onnx", match="self.onnx: a loop of symbolic links")


def test_dangling_symlink_input(gf):
    os.symlink("gone.onnx", gf.folder / "link.onnx")
    gf.refused("optimize", "link.onnx", "out.onnx",
               match="link.onnx: a symbolic link to gone.onnx, which does not exist")


def test_symlink_input_is_read_through(gf):
    gf.model(gf.models.nhwc())
    os.symlink("m.onnx", gf.folder / "link.onnx")
    gf.optimized("link.onnx", "out.onnx")
    assert os.readlink(gf.folder / "link.onnx") == "m.onnx"


def test_symlink_to_a_model_with_external_data_elsewhere(gf):
    """A link in one folder to a model whose data file lies beside the model in another: the
    data is found beside the target and the result is right. (ONNX Runtime itself cannot load
    the link: it looks for m.data beside it; the function is the target's.)"""
    (gf.folder / "real").mkdir()
    gf.model(name="real/m.onnx", location="m.data")
    os.symlink("real/m.onnx", gf.folder / "link.onnx")
    gf.succeeded("optimize", "link.onnx", "out.onnx", produces=["out.onnx", "out.onnx.data"])
    gf.assert_same_function(gf.folder / "real" / "m.onnx", gf.folder / "out.onnx")
    gf.succeeded("inspect", "link.onnx")


def test_symlinks_side_by_side_like_a_hugging_face_cache(gf):
    """snapshots/m.onnx and snapshots/m.data are links to blobs named by their hash (the
    Hugging Face cache): the data is found beside the link, where ONNX Runtime looks."""
    blobs, snapshot = gf.folder / "blobs", gf.folder / "snapshot"
    blobs.mkdir()
    snapshot.mkdir()
    gf.model(name="blobs/m.onnx", location="m.data")
    os.rename(blobs / "m.onnx", blobs / "1111")
    os.rename(blobs / "m.data", blobs / "2222")
    os.symlink("../blobs/1111", snapshot / "m.onnx")
    os.symlink("../blobs/2222", snapshot / "m.data")
    gf.optimized("snapshot/m.onnx", "out.onnx", produces=["out.onnx", "out.onnx.data"])


@pytest.mark.parametrize("spelling", ["two-links", "folder-link", "dot-slash", "dot-dot",
                                      "absolute", "hard-links"])
def test_one_file_through_two_spellings_is_refused(gf, spelling):
    path = gf.model()
    (gf.folder / "sub").mkdir()
    if spelling == "two-links":
        os.symlink("m.onnx", gf.folder / "a.onnx")
        os.symlink("m.onnx", gf.folder / "b.onnx")
        src, dst = "a.onnx", "b.onnx"
    elif spelling == "folder-link":
        os.symlink(".", gf.folder / "here")
        src, dst = "m.onnx", "here/m.onnx"
    elif spelling == "dot-slash":
        src, dst = "m.onnx", "./m.onnx"
    elif spelling == "dot-dot":
        src, dst = "sub/../m.onnx", "m.onnx"
    elif spelling == "absolute":
        src, dst = "m.onnx", str(path)
    else:
        os.link(path, gf.folder / "a.onnx")
        os.link(path, gf.folder / "b.onnx")
        src, dst = "a.onnx", "b.onnx"
    gf.refused("optimize", src, dst, match="overwrite|same file")


# --------------------------------------------------------------------------- outputs
def test_output_in_a_missing_folder(gf):
    gf.model()
    gf.refused("optimize", "m.onnx", "missing/deeper/out.onnx", match="no such folder")


@pytest.mark.parametrize("output", ["afile/out.onnx", "afile/deeper/out.onnx"])
def test_output_under_a_file_names_the_file(gf, output):
    gf.model()
    (gf.folder / "afile").write_text("x")
    gf.refused("optimize", "m.onnx", output, match="^error: afile: a file, not a folder")


def test_output_in_a_read_only_folder(gf, is_root):
    """Refused before the passes run (no progress line): the folder is checked up front."""
    if is_root:
        pytest.skip("root writes into a read-only folder")
    gf.model()
    locked = gf.folder / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        outcome = gf.refused("optimize", "m.onnx", "locked/out.onnx", match="locked")
        assert "[1/" not in outcome.stderr, outcome.describe()
    finally:
        locked.chmod(0o755)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc here")
@pytest.mark.parametrize("command", ["optimize", "tune"])
def test_output_in_a_folder_that_refuses_files_whatever_its_permissions(gf, command):
    """/proc lets root pass the permission check and still refuses a new file there, as a
    read-only mount does: refused before the work (no progress line), naming the path asked
    for, not the staging folder's pattern."""
    gf.model()
    args = (["optimize", "m.onnx", "/proc/out.onnx"] if command == "optimize" else
            ["tune", "m.onnx", "--budget", "2", "--out", "/proc/out.json"])
    outcome = gf.refused(*args, match="/proc")
    assert "XXXX" not in outcome.stderr and "[1/" not in outcome.stderr, outcome.describe()
    assert "rung" not in outcome.stderr, outcome.describe()


def test_output_in_a_folder_reached_through_a_link_loop(gf):
    gf.model()
    os.symlink("loop2", gf.folder / "loop1")
    os.symlink("loop1", gf.folder / "loop2")
    gf.refused("optimize", "m.onnx", "loop1/out.onnx", match="loop1: a loop of symbolic links")


def test_output_that_is_a_folder(gf):
    gf.model()
    (gf.folder / "out.onnx").mkdir()
    gf.refused("optimize", "m.onnx", "out.onnx", match="folder")


def test_empty_output_name(gf):
    gf.model()
    gf.refused("optimize", "m.onnx", "", match="no path given")


@pytest.mark.parametrize("dst", [".", "..", "sub/.", "sub/"])
def test_output_is_dot(gf, dst):
    """A folder as DST is refused (not written as DST/m.onnx: the output's name is the user's
    to choose, and '.' would be the input itself)."""
    gf.model()
    (gf.folder / "sub").mkdir()
    gf.refused("optimize", "m.onnx", dst, match="names a folder")


def test_output_with_a_trailing_slash(gf):
    """'new/' names a folder (that does not exist): refused, not written as a file 'new'."""
    gf.model()
    gf.refused("optimize", "m.onnx", "new/", match="names a folder")


def test_report_with_a_trailing_slash(gf):
    gf.model()
    gf.refused("optimize", "m.onnx", "out.onnx", "--report", "r/", match="names a folder")


def test_empty_input_name(gf):
    gf.refused("optimize", "", "out.onnx")


# --------------------------------------------------------------------------- names
@pytest.mark.parametrize("name", ["my model v2.onnx", "modèle 模型 🚀.onnx"])
def test_names_with_spaces_and_unicode(gf, name):
    gf.model(gf.models.nhwc(), name)
    gf.optimized(name, "out " + name, "--report", "rapport é.json",
                 produces=["out " + name, "rapport é.json"])
    gf.succeeded("inspect", name)


def test_a_newline_in_a_missing_name_stays_one_line(gf):
    gf.refused("optimize", "bad\nname.onnx", "out.onnx", match=r"'bad\\nname.onnx': no such")


def test_a_newline_in_an_output_name_stays_one_line(gf):
    gf.model()
    gf.refused("optimize", "m.onnx", "missing\nfolder/out.onnx", match=r"'missing\\nfolder'")


def test_leading_dash_names_after_double_dash(gf):
    gf.model(name="-m.onnx")
    gf.optimized("--", "-m.onnx", "-out.onnx", produces=["-out.onnx"], compare=False)
    gf.assert_same_function(gf.folder / "-m.onnx", gf.folder / "-out.onnx")


def test_leading_dash_names_without_double_dash_are_a_usage_error(gf):
    gf.model(name="-m.onnx")
    gf.usage_error("optimize", "-m.onnx", "-out.onnx")


def test_longest_allowed_input_name(gf):
    name = "i" * 250 + ".onnx"
    gf.model(name=name)
    gf.optimized(name, "out.onnx")


def test_longest_allowed_output_name(gf):
    gf.model()
    name = "o" * 250 + ".onnx"
    gf.optimized("m.onnx", name, produces=[name])


def test_longest_allowed_output_name_without_external_data(gf):
    gf.model()
    name = "o" * 250 + ".onnx"
    gf.optimized("m.onnx", name, "--no-external-data", produces=[name])


def test_long_output_name(gf):
    gf.model()
    name = "o" * 240 + ".onnx"
    gf.optimized("m.onnx", name, "--no-external-data", produces=[name])


def test_name_over_name_max(gf):
    gf.model()
    gf.refused("optimize", "m" * 300 + ".onnx", "out.onnx")
    gf.refused("optimize", "m.onnx", "o" * 300 + ".onnx")


def _deep() -> str:
    return "/".join(["d" * 200] * 25) + "/m.onnx"  # about 5000 bytes, over PATH_MAX


def test_input_path_over_path_max(gf):
    gf.refused("inspect", _deep())
    gf.refused("optimize", _deep(), "out.onnx")


def test_output_path_over_path_max(gf):
    gf.model()
    gf.refused("optimize", "m.onnx", _deep())


# --------------------------------------------------------------------------- data files
def test_output_is_the_inputs_data_file_through_dot_dot(gf):
    gf.model(location="w.data")
    (gf.folder / "sub").mkdir()
    gf.refused("optimize", "m.onnx", "sub/../w.data", match="external data|overwrite")


def test_output_is_a_link_to_the_inputs_data_file(gf):
    gf.model(location="w.data")
    os.symlink("w.data", gf.folder / "out.onnx")
    gf.refused("optimize", "m.onnx", "out.onnx", match="external data|overwrite")


def test_report_is_the_inputs_data_file(gf):
    gf.model(location="w.data")
    gf.refused("optimize", "m.onnx", "out.onnx", "--report", "w.data",
               match="external data|overwrite")


def test_output_is_the_inputs_npz(gf):
    gf.model()
    np.savez(gf.folder / "x.npz", x=np.ones((1, 16), np.float32))
    gf.refused("optimize", "m.onnx", "x.npz", "--inputs", "x.npz", match="overwrite")


# --------------------------------------------------------------------------- where from
def test_relative_paths_from_another_folder(gf):
    (gf.folder / "a").mkdir()
    (gf.folder / "b").mkdir()
    gf.model(name="a/m.onnx", location="m.data")
    gf.optimized("../a/m.onnx", "out.onnx", cwd=gf.folder / "b",
                 produces=["b/out.onnx", "b/out.onnx.data"])


def test_absolute_paths(gf):
    path = gf.model(gf.models.nhwc())
    gf.optimized(str(path), str(gf.folder / "out.onnx"), cwd=Path("/"),
                 produces=["out.onnx"])


def test_paths_through_dot_dot(gf):
    (gf.folder / "a" / "b").mkdir(parents=True)
    gf.model(name="a/m.onnx")
    gf.optimized("a/b/../m.onnx", "a/b/../../out.onnx", produces=["out.onnx"])


def test_fifo_input_is_refused_at_once(gf):
    """A FIFO nobody writes to: reading it would block forever. After 2 s a writer opens and
    closes it (so a blocked reader gets an empty file): graphfix must have answered before."""
    fifo = gf.folder / "pipe.onnx"
    os.mkfifo(fifo)

    def unblock() -> None:
        time.sleep(2)
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass  # nobody is reading: graphfix did not block

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    started = time.perf_counter()
    gf.refused("inspect", "pipe.onnx")
    seconds = time.perf_counter() - started
    thread.join()
    assert seconds < 2, f"graphfix blocked on the FIFO for {seconds:.1f}s"


def test_dev_null_input(gf):
    gf.refused("optimize", os.devnull, "out.onnx", match="empty|regular")


def test_dev_zero_input_is_refused_at_once(gf):
    """A file without end: refused before a byte is read (tools/hostile.py runs it under a
    memory limit)."""
    gf.refused("inspect", "/dev/zero", match="character device, not a regular file")


def test_a_model_file_over_two_gibibytes_is_refused_before_reading(gf, tmp_path_factory):
    """A sparse file of 2 GiB + 1: protobuf cannot parse a model that large; refused from its
    size, before it is read (outside the test's folder, which the helper reads to compare)."""
    huge = tmp_path_factory.mktemp("huge") / "huge.onnx"
    with open(huge, "wb") as f:
        f.truncate(2**31 + 1)
    started = time.perf_counter()
    gf.refused("inspect", huge, match="over protobuf's 2 GiB limit")
    assert time.perf_counter() - started < 5
    huge.unlink()


def test_output_folder_through_a_link(gf):
    (gf.folder / "real").mkdir()
    os.symlink("real", gf.folder / "via")
    gf.model(gf.models.nhwc())
    gf.optimized("m.onnx", "via/out.onnx", produces=["real/out.onnx"])


def test_dangling_link_as_output(gf):
    """An output that is a link to a file that does not exist yet: written (through the link or
    in its place), or refused, but never half-done."""
    gf.model()
    os.symlink("nowhere/target.onnx", gf.folder / "out.onnx")
    outcome = gf.invoke("optimize", "m.onnx", "out.onnx")
    gf._common(outcome)
    if outcome.code == 0:
        assert (gf.folder / "out.onnx").is_file()
        gf.assert_same_function(gf.folder / "m.onnx", gf.folder / "out.onnx")
    else:
        assert outcome.code == 1 and len(outcome.error_lines) == 1, outcome.describe()
        assert outcome.added == outcome.changed == outcome.removed == [], outcome.describe()


def test_check_a_file_against_itself(gf):
    gf.model()
    gf.succeeded("check", "m.onnx", "m.onnx")


def test_check_with_a_missing_candidate(gf):
    gf.model()
    gf.refused("check", "m.onnx", "missing.onnx", match="missing.onnx")
