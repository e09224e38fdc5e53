"""Every file graphfix reads against every file it writes, however it reached it; the data-file
rule; the library's identity rules.

Cases: outputs and reports that are --inputs files (a folder of input_N.pb, test_data_set_*
folders, a .npz), reached through every spelling (``./``, ``sub/..``, absolute, a symbolic link,
a hard link, a link to the folder), and a data file that is a hard link of an input tensor;
the data-file rule (a backup copy, a hard link, another model naming the data file, a report
named like the data file, a data file this run reads, a symbolic link to the model, no other
model at all); the library (``save(load(...))`` onto a model's own data file, weights in memory
or not, after ``optimize``, and ``optimize_file`` through the library's paths).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import graphfix
from graphfix.errors import GraphfixError, ModelSaveError


def _pb_folder(gf, folder: str = "td", *, sets: int = 0, n: int = 16) -> Path:
    """m.onnx (x float32 [1, n]) and real inputs for it: ``folder/input_0.pb``, or ``sets``
    folders ``folder/test_data_set_<i>/input_0.pb``."""
    gf.model()
    root = gf.folder / folder
    rng = np.random.default_rng(3)
    targets = [root] if not sets else [root / f"test_data_set_{i}" for i in range(sets)]
    for target in targets:
        target.mkdir(parents=True)
        tensor = numpy_helper.from_array(rng.standard_normal((1, n)).astype(np.float32), "x")
        (target / "input_0.pb").write_bytes(tensor.SerializeToString())
    return root


def _npz(gf, name: str = "in.npz") -> Path:
    gf.model()
    np.savez(gf.folder / name, x=np.ones((1, 16), np.float32))
    return gf.folder / name


# ------------------------------------------------------------------ outputs that are inputs
def _dst_is_input(gf):
    _pb_folder(gf)
    return ["optimize", "m.onnx", "td/input_0.pb", "--inputs", "td"]


def _report_is_input(gf):
    _pb_folder(gf)
    return ["optimize", "m.onnx", "out.onnx", "--inputs", "td", "--report", "td/input_0.pb"]


def _dst_in_a_data_set(gf):
    _pb_folder(gf, sets=2)
    return ["optimize", "m.onnx", "td/test_data_set_1/input_0.pb", "--inputs", "td"]


def _report_in_a_data_set(gf):
    _pb_folder(gf, sets=2)
    return ["optimize", "m.onnx", "out.onnx", "--inputs", "td", "--report",
            "td/test_data_set_0/input_0.pb"]


def _dst_dot_spelling(gf):
    _pb_folder(gf)
    return ["optimize", "m.onnx", "td/./input_0.pb", "--inputs", "td"]


def _dst_dotdot_spelling(gf):
    _pb_folder(gf)
    (gf.folder / "td" / "sub").mkdir()
    return ["optimize", "m.onnx", "td/sub/../input_0.pb", "--inputs", "td"]


def _dst_absolute(gf):
    _pb_folder(gf)
    return ["optimize", "m.onnx", str(gf.folder / "td" / "input_0.pb"), "--inputs", "td"]


def _dst_symlink_to_input(gf):
    _pb_folder(gf)
    os.symlink("td/input_0.pb", gf.folder / "link.onnx")
    return ["optimize", "m.onnx", "link.onnx", "--inputs", "td"]


def _dst_hard_link_to_input(gf):
    _pb_folder(gf)
    os.link(gf.folder / "td" / "input_0.pb", gf.folder / "hard.onnx")
    return ["optimize", "m.onnx", "hard.onnx", "--inputs", "td"]


def _report_symlink_to_input(gf):
    _pb_folder(gf)
    os.symlink("td/input_0.pb", gf.folder / "r.json")
    return ["optimize", "m.onnx", "out.onnx", "--inputs", "td", "--report", "r.json"]


def _inputs_through_folder_link(gf):
    _pb_folder(gf)
    os.symlink("td", gf.folder / "alias")
    return ["optimize", "m.onnx", "td/input_0.pb", "--inputs", "alias"]


def _data_file_is_an_input(gf):
    """out.onnx.data would be written, and it is a hard link of the input tensor."""
    _pb_folder(gf)
    os.link(gf.folder / "td" / "input_0.pb", gf.folder / "out.onnx.data")
    return ["optimize", "m.onnx", "out.onnx", "--inputs", "td", "--external-data"]


def _report_is_npz(gf):
    _npz(gf)
    return ["optimize", "m.onnx", "out.onnx", "--inputs", "in.npz", "--report", "in.npz"]


def _report_hard_link_to_npz(gf):
    _npz(gf)
    os.link(gf.folder / "in.npz", gf.folder / "r.json")
    return ["optimize", "m.onnx", "out.onnx", "--inputs", "in.npz", "--report", "r.json"]


def _second_input_is_dst(gf):
    """A model of two inputs; the output is input_1.pb."""
    gf.model(gf.models.parse("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1,4] a, float[1,4] b) => (float[1,4] y) { y = Add (a, b) }"""))
    (gf.folder / "td").mkdir()
    for index, name in enumerate("ab"):
        tensor = numpy_helper.from_array(np.full((1, 4), index, np.float32), name)
        (gf.folder / "td" / f"input_{index}.pb").write_bytes(tensor.SerializeToString())
    return ["optimize", "m.onnx", "td/input_1.pb", "--inputs", "td"]


def _tune_out_in_a_data_set(gf):
    _pb_folder(gf)
    return ["tune", "m.onnx", "--budget", "1", "--inputs", "td", "--out", "td/input_0.pb"]


def _profile_page_in_a_data_set(gf):
    _pb_folder(gf)
    return ["profile", "m.onnx", "--runs", "5", "--inputs", "td", "--html", "td/input_0.pb"]


def _profile_trace_in_a_data_set(gf):
    _pb_folder(gf)
    return ["profile", "m.onnx", "--runs", "5", "--inputs", "td", "--trace", "td/input_0.pb"]


OUTPUT_IS_INPUT = [_dst_is_input, _report_is_input, _dst_in_a_data_set, _report_in_a_data_set,
                   _dst_dot_spelling, _dst_dotdot_spelling, _dst_absolute, _dst_symlink_to_input,
                   _dst_hard_link_to_input, _report_symlink_to_input, _inputs_through_folder_link,
                   _data_file_is_an_input, _report_is_npz, _report_hard_link_to_npz,
                   _second_input_is_dst, _tune_out_in_a_data_set, _profile_page_in_a_data_set,
                   _profile_trace_in_a_data_set]


@pytest.mark.parametrize("make", OUTPUT_IS_INPUT, ids=lambda f: f.__name__.strip("_"))
def test_an_output_that_is_a_file_read_through_inputs_is_refused(gf, make):
    gf.refused(*make(gf), match="refusing to overwrite|would replace|same file")


def test_the_library_checks_inputs_files_too(gf):
    _pb_folder(gf)
    before = (gf.folder / "td" / "input_0.pb").read_bytes()
    with pytest.raises(GraphfixError, match="refusing to overwrite"):
        graphfix.optimize_file(gf.folder / "m.onnx", gf.folder / "td" / "input_0.pb",
                               parity=graphfix.ParityOptions(inputs=gf.folder / "td"))
    assert (gf.folder / "td" / "input_0.pb").read_bytes() == before


# ------------------------------------------------------------------ the data-file rule
def _ext_then_backup(gf, backup: str = "copy") -> None:
    """out.onnx written with its data in out.onnx.data, and a backup of out.onnx made the
    way ``backup`` says (beside it, so it refers to out.onnx.data too)."""
    gf.model(name="ext.onnx", location="ext.data")
    gf.model(gf.models.two_weights(), name="plain.onnx")
    gf.optimized("ext.onnx", "out.onnx", produces=["out.onnx", "out.onnx.data"])
    if backup == "copy":
        shutil.copy(gf.folder / "out.onnx", gf.folder / "backup.onnx")
    elif backup == "hard":
        os.link(gf.folder / "out.onnx", gf.folder / "backup.onnx")
    elif backup == "symbolic":
        os.symlink("out.onnx", gf.folder / "backup.onnx")
    elif backup == "other-name":  # another model saved earlier, naming the same data file
        model = onnx.load(str(gf.folder / "out.onnx"), load_external_data=False)
        model.doc_string = "another model"
        (gf.folder / "backup.onnx").write_bytes(model.SerializeToString())


@pytest.mark.parametrize("backup", ["copy", "hard", "other-name"])
def test_a_data_file_another_model_refers_to_is_not_removed(gf, backup):
    _ext_then_backup(gf, backup)
    want = gf.ort_outputs(gf.folder / "backup.onnx", gf.seeded_feeds(gf.models.matmul()))
    outcome = gf.invoke("optimize", "plain.onnx", "out.onnx", "--no-external-data")
    assert outcome.code == 0 and outcome.removed == [], outcome.describe()
    assert "stays" in outcome.stderr, outcome.describe()
    gf.assert_same_function(gf.folder / "plain.onnx", gf.folder / "out.onnx")
    assert (gf.folder / "out.onnx.data").exists()
    got = gf.ort_outputs(gf.folder / "backup.onnx", gf.seeded_feeds(gf.models.matmul()))
    np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.parametrize("backup", ["copy", "hard", "other-name"])
def test_a_data_file_another_model_refers_to_is_not_replaced(gf, backup):
    _ext_then_backup(gf, backup)
    gf.model(gf.models.two_weights(), name="ext2.onnx", location="ext2.data")
    gf.refused("optimize", "ext2.onnx", "out.onnx", match="backup.onnx.* refers to it")
    gf.assert_same_function(gf.folder / "ext.onnx", gf.folder / "backup.onnx")


def test_a_link_to_the_model_does_not_keep_its_old_data_file(gf):
    """A symbolic link follows the new model: the old data file is nobody's."""
    _ext_then_backup(gf, "symbolic")
    outcome = gf.invoke("optimize", "plain.onnx", "out.onnx", "--no-external-data")
    assert outcome.code == 0, outcome.describe()
    assert not (gf.folder / "out.onnx.data").exists()
    gf.assert_same_function(gf.folder / "plain.onnx", gf.folder / "backup.onnx")


def test_without_another_model_the_old_data_file_goes(gf):
    _ext_then_backup(gf, "none")
    outcome = gf.invoke("optimize", "plain.onnx", "out.onnx", "--no-external-data")
    assert outcome.code == 0 and outcome.removed == [str(gf.folder / "out.onnx.data")], (
        outcome.describe())
    gf.assert_same_function(gf.folder / "plain.onnx", gf.folder / "out.onnx")


def test_a_report_named_like_the_data_file_is_not_removed_as_stale(gf):
    _ext_then_backup(gf, "none")
    outcome = gf.invoke("optimize", "plain.onnx", "out.onnx", "--report", "out.onnx.data")
    assert outcome.code == 0, outcome.describe()
    assert (gf.folder / "out.onnx.data").read_text().lstrip().startswith("{")


def test_a_data_file_this_run_reads_is_not_removed(gf):
    """The input's data file is named out.onnx.data, and the old out.onnx used it too."""
    gf.model(name="in.onnx", location="out.onnx.data")
    shutil.copy(gf.folder / "in.onnx", gf.folder / "out.onnx")
    outcome = gf.invoke("optimize", "in.onnx", "out.onnx", "--no-external-data")
    assert outcome.code == 0, outcome.describe()
    assert (gf.folder / "out.onnx.data").exists()
    gf.assert_same_function(gf.folder / "in.onnx", gf.folder / "out.onnx")


def test_a_rerun_with_external_data_replaces_its_own_data_file(gf):
    """Nobody else refers to out.onnx.data: a second run replaces it, and the model loads."""
    gf.model(name="ext.onnx", location="ext.data")
    gf.optimized("ext.onnx", "out.onnx", produces=["out.onnx", "out.onnx.data"])
    outcome = gf.invoke("optimize", "ext.onnx", "out.onnx")
    assert outcome.code == 0 and outcome.added == outcome.removed == [], outcome.describe()
    gf.assert_same_function(gf.folder / "ext.onnx", gf.folder / "out.onnx")


# ------------------------------------------------------------------ the library
def test_saving_a_loaded_model_onto_its_own_data_file_is_refused(gf):
    path = gf.model(name="e.onnx", location="e.data")
    before = (gf.folder / "e.data").read_bytes()
    with pytest.raises(ModelSaveError, match="e.onnx.* refers to it"):
        graphfix.save(graphfix.load(path), gf.folder / "e", external_data=True)
    assert (gf.folder / "e.data").read_bytes() == before
    assert not (gf.folder / "e").exists()
    gf.ort_session(path)


def test_saving_a_lazily_loaded_model_onto_its_own_data_file_is_refused(gf):
    path = gf.model(name="e.onnx", location="e.data")
    with pytest.raises(ModelSaveError):
        graphfix.save(graphfix.load(path, load_external_data=False), gf.folder / "e",
                      external_data=True)
    gf.ort_session(path)


def test_saving_the_optimized_model_onto_the_inputs_data_file_is_refused(gf):
    path = gf.model(name="e.onnx", location="e.data")
    result = graphfix.optimize(graphfix.load(path))
    with pytest.raises(ModelSaveError):
        graphfix.save(result.model, gf.folder / "e", external_data=True)
    gf.ort_session(path)


def test_optimize_file_onto_the_inputs_data_file_is_refused(gf):
    path = gf.model(name="e.onnx", location="e.data")
    with pytest.raises(ModelSaveError):
        graphfix.optimize_file(path, gf.folder / "e")
    gf.ort_session(path)


def test_saving_where_another_model_names_the_data_file_is_refused(gf):
    gf.model(name="y.onnx", location="x.onnx.data")
    with pytest.raises(ModelSaveError, match="y.onnx"):
        graphfix.save(gf.models.matmul(), gf.folder / "x.onnx", external_data=True)
    gf.ort_session(gf.folder / "y.onnx")


def test_saving_a_loaded_model_beside_it_works(gf):
    path = gf.model(name="e.onnx", location="e.data")
    graphfix.save(graphfix.load(path), gf.folder / "f.onnx", external_data=True)
    gf.assert_same_function(path, gf.folder / "f.onnx")
    gf.ort_session(path)
