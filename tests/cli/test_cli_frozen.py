"""`graph-override inspect` and `graph-override patch`: exit codes, output,
and files written (or not)."""

import hashlib
import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from graph_override import cli, frozen

DEAD_NAME = "CustomGradient-987654321"


def _sign_model():
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None, 3], name="x")
        w = tf.constant(np.array([[1.0, -2.0], [0.5, 0.0], [-1.0, 3.0]], np.float32))
        h = tf.sign(tf.matmul(x, w), name="hidden/sign")
        tf.identity(tf.sign(h, name="out/sign"), name="y")
    return g.as_graph_def()


def _custom_model(dead=True):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")

        @tf.custom_gradient
        def ste(t):
            return tf.sign(t), lambda dy: dy

        tf.identity(ste(x), name="y")
    graph_def = tf.compat.v1.graph_util.extract_sub_graph(g.as_graph_def(), ["y"])
    if dead:
        for node in graph_def.node:
            if frozen.GRADIENT_ATTR in node.attr:
                node.attr[frozen.GRADIENT_ATTR].s = DEAD_NAME.encode()
    return graph_def


@pytest.fixture
def models(tmp_path):
    sign = tmp_path / "model.pb"
    custom = tmp_path / "custom.pb"
    frozen.save(_sign_model(), sign)
    frozen.save(_custom_model(), custom)
    return tmp_path, str(sign), str(custom)


def _main(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_inspect_text_and_exit_status(models, capsys):
    folder, sign, custom = models
    code, out, _ = _main(capsys, "inspect", sign)
    assert code == 1
    assert "2 node(s) whose gradient is zero everywhere" in out
    assert "--map Sign=ste_sign" in out
    code, out, _ = _main(capsys, "inspect", custom)
    assert code == 1
    assert "node(s) whose gradient will fail" in out and DEAD_NAME in out
    fixed = str(folder / "fixed.pb")
    assert _main(capsys, "patch", sign, "-o", fixed, "--map", "Sign=ste_sign")[0] == 0
    code, out, _ = _main(capsys, "inspect", fixed)
    assert code == 0
    assert "graph_override.ste_sign(clip_value=1.0)  2      yes" in out


def test_inspect_json(models, capsys):
    _, _, custom = models
    code, out, _ = _main(capsys, "inspect", custom, "--json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False and data["file"] == custom
    assert data["gradient_failures"][0]["gradient"] == DEAD_NAME
    assert data["op_types"]["IdentityN"] == 1


def test_inspect_unreadable_input_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"")
    code, out, err = _main(capsys, "inspect", str(bad))
    assert code == 2 and out == ""
    assert str(bad) in err and "empty" in err


def test_patch_writes_and_reports(models, capsys):
    folder, sign, _ = models
    out_path = folder / "fixed.pb"
    code, out, _ = _main(capsys, "patch", sign, "-o", str(out_path), "--map", "Sign=ste_sign")
    assert code == 0
    assert "2 node(s) changed" in out and "hidden/sign" in out and "out/sign" in out
    assert "wrote %s" % out_path in out
    graph = frozen.load(out_path)
    names = {n.name: n.attr[frozen.GRADIENT_ATTR].s.decode() for n in graph.node
             if frozen.GRADIENT_ATTR in n.attr}
    assert names == dict.fromkeys(["hidden/sign", "out/sign"],
                                  "graph_override.ste_sign(clip_value=1.0)")


def test_patch_select_and_json(models, capsys):
    folder, sign, _ = models
    out_path = folder / "fixed.pb"
    code, out, _ = _main(capsys, "patch", sign, "-o", str(out_path), "--map",
                         "Sign=approx_sign", "--select", "^hidden/", "--json")
    data = json.loads(out)
    assert code == 0 and data["output"] == str(out_path)
    assert [c["node"] for c in data["changes"]] == ["hidden/sign"]
    assert data["changes"][0]["after"] == "graph_override.approx_sign()"


def test_patch_dry_run_writes_nothing(models, capsys):
    folder, sign, _ = models
    before = sorted(os.listdir(folder))
    code, out, _ = _main(capsys, "patch", sign, "--map", "Sign=ste_sign", "--dry-run")
    assert code == 0 and "dry run: nothing written" in out
    code, out, _ = _main(capsys, "patch", sign, "-o", str(folder / "x.pb"),
                         "--map", "Sign=ste_sign", "--dry-run")
    assert code == 0
    assert sorted(os.listdir(folder)) == before


def test_patch_portable_repairs_the_custom_gradient(models, capsys):
    folder, _, custom = models
    out_path = folder / "portable.pb"
    code, out, _ = _main(capsys, "patch", custom, "-o", str(out_path), "--portable",
                         "--map", "gradient:CustomGradient-*=ste_sign")
    assert code == 0 and "made portable" in out and DEAD_NAME in out
    assert frozen.inspect(frozen.load(out_path)).ok


def test_patch_exit_1_when_a_rule_selects_nothing(models, capsys):
    folder, sign, _ = models
    code, _, err = _main(capsys, "patch", sign, "-o", str(folder / "o.pb"),
                         "--map", "Round=ste_round")
    assert code == 1 and "selected no node" in err and "--allow-no-match" in err
    assert not (folder / "o.pb").exists()
    code, _, _ = _main(capsys, "patch", sign, "-o", str(folder / "o.pb"),
                       "--map", "Round=ste_round", "--allow-no-match")
    assert code == 0 and (folder / "o.pb").exists()


def test_patch_portable_refuses_clip_gradient(models, capsys):
    folder, sign, _ = models
    code, _, err = _main(capsys, "patch", sign, "-o", str(folder / "o.pb"), "--portable",
                         "--map", "Identity=clip_gradient:clip_value_min=-1,clip_value_max=1")
    assert code == 1 and "not linear in dy" in err
    assert not (folder / "o.pb").exists()


@pytest.mark.parametrize("argv, match", [
    (["--map", "sign=ste_sign"], "Did you mean 'Sign'"),
    (["--map", "Sign"], "expected SELECTOR=ACTION"),
    (["--map", "Sign=ste_sign:clip=2"], "unknown parameter"),
    (["--map", "*=flip_gradient"], "--select"),
    (["--map", "Sign=ste_tern:ternary_weight_networks=yes"],
     "parameter ternary_weight_networks: 'yes' is not a number, True, False or None"),
])
def test_patch_bad_map_exits_2(models, capsys, argv, match):
    folder, sign, _ = models
    code, _, err = _main(capsys, "patch", sign, "-o", str(folder / "o.pb"), *argv)
    assert code == 2 and match in err
    assert not (folder / "o.pb").exists()


def test_patch_takes_boolean_and_none_parameters(models, capsys):
    folder, sign, _ = models
    out_path = str(folder / "tern.pb")
    code, _, err = _main(capsys, "patch", sign, "-o", out_path, "--select", "^out/",
                         "--map", "Sign=ste_tern:ternary_weight_networks=True,clip_value=None")
    assert code == 0, err
    assert frozen.nodes_by_gradient(frozen.load(out_path)) == {
        "graph_override.ste_tern(threshold_value=0.05, ternary_weight_networks=True, "
        "clip_value=None)": ["out/sign"]}


def test_patch_output_rules(models, capsys):
    folder, sign, custom = models
    original = open(sign, "rb").read()
    code, _, err = _main(capsys, "patch", sign, "-o", sign, "--map", "Sign=ste_sign")
    assert code == 2 and "is the input file" in err and "--force" in err
    assert open(sign, "rb").read() == original
    code, _, err = _main(capsys, "patch", sign, "-o", custom, "--map", "Sign=ste_sign")
    assert code == 2 and "exists already" in err
    code, _, err = _main(capsys, "patch", sign, "-o", str(folder / "no" / "o.pb"),
                         "--map", "Sign=ste_sign")
    assert code == 2 and "does not exist" in err
    code, _, err = _main(capsys, "patch", sign, "--map", "Sign=ste_sign")
    assert code == 2 and "-o OUT is required" in err
    code, _, _ = _main(capsys, "patch", sign, "-o", custom, "--map", "Sign=ste_sign",
                       "--force")
    assert code == 0
    assert any(frozen.GRADIENT_ATTR in n.attr for n in frozen.load(custom).node)


@pytest.mark.parametrize("content", [b"", b"\x00\x01garbage" * 10, b"hello world\n"])
def test_patch_unreadable_model_exits_2_and_writes_nothing(tmp_path, capsys, content):
    bad = tmp_path / "bad.pb"
    bad.write_bytes(content)
    code, _, err = _main(capsys, "patch", str(bad), "-o", str(tmp_path / "o.pb"),
                         "--map", "Sign=ste_sign")
    assert code == 2 and str(bad) in err
    assert sorted(os.listdir(tmp_path)) == ["bad.pb"]


def _broken_graph(kind):
    graph = _sign_model()
    if kind == "duplicate":
        graph.node.add().CopyFrom(graph.node[0])
    else:
        graph.node[-1].input[0] = "gone"
    return graph.SerializeToString()


@pytest.mark.parametrize("kind, match", [("duplicate", "two nodes are named 'x'"),
                                         ("dangling", "no node is named 'gone'")])
def test_patch_invalid_graph_exits_2_and_writes_nothing(tmp_path, capsys, kind, match):
    bad = tmp_path / ("%s.pb" % kind)
    bad.write_bytes(_broken_graph(kind))
    code, _, err = _main(capsys, "patch", str(bad), "-o", str(tmp_path / "o.pb"),
                         "--map", "Sign=ste_sign")
    assert code == 2 and str(bad) in err and match in err
    assert sorted(os.listdir(tmp_path)) == [bad.name]


def test_saved_model_directory_and_file_exit_2(tmp_path, capsys):
    module = tf.Module()
    module.f = tf.function(lambda x: 2.0 * x, input_signature=[tf.TensorSpec([], tf.float32)])
    saved = tmp_path / "saved"
    tf.saved_model.save(module, str(saved))
    before = sorted(os.listdir(tmp_path))
    for target in (saved, saved / "saved_model.pb"):
        code, _, err = _main(capsys, "patch", str(target), "-o", str(tmp_path / "o.pb"),
                             "--map", "Sign=ste_sign")
        assert code == 2 and str(target) in err and "SavedModel" in err
    assert sorted(os.listdir(tmp_path)) == before


def test_missing_model_exits_2(tmp_path, capsys):
    code, _, err = _main(capsys, "patch", str(tmp_path / "nope.pb"), "-o",
                         str(tmp_path / "o.pb"), "--map", "Sign=ste_sign")
    assert code == 2 and "nope.pb: no such file" in err


@pytest.mark.parametrize("command, words", [
    ("inspect", ["--json", "graph-override inspect model.pb", "Exit status"]),
    ("patch", ["--map", "--select", "--portable", "--dry-run",
               "graph-override patch model.pb -o fixed.pb --map Sign=ste_sign",
               "gradient:CustomGradient-*", "Exit status"]),
])
def test_help_has_examples(capsys, command, words):
    with pytest.raises(SystemExit) as info:
        cli.main([command, "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    for word in words:
        assert word in out


def test_console_script_in_a_fresh_process(tmp_path):
    """A real tf.custom_gradient name is dead in any other process."""
    path = tmp_path / "custom.pb"
    frozen.save(_custom_model(dead=False), path)
    exe = shutil.which("graph-override")
    assert exe, "the graph-override console script is not installed (pip install -e .)"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([exe, "inspect", str(path), "--json"], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    [failure] = data["gradient_failures"]
    assert failure["op"] == "IdentityN" and failure["gradient"].startswith("CustomGradient-")


def test_repeated_parameter_is_a_usage_error(models, capsys):
    folder, sign, _ = models
    code, _, err = _main(capsys, "patch", sign, "-o", str(folder / "o.pb"), "--map",
                         "Sign=ste_sign:clip_value=1,clip_value=2")
    assert code == 2 and "'clip_value' is given twice" in err
    assert not (folder / "o.pb").exists()


@pytest.mark.parametrize("limit", ["-1", "0", "x"])
def test_inspect_limit_must_be_positive(models, capsys, limit):
    _, sign, _ = models
    with pytest.raises(SystemExit) as exc:
        cli.main(["inspect", sign, "--limit", limit])
    _, err = capsys.readouterr()
    assert exc.value.code == 2 and "expected a positive number of rows" in err


def test_inspect_limit_cuts_tables(models, capsys):
    _, sign, _ = models
    code, out, _ = _main(capsys, "inspect", sign, "--limit", "1")
    assert code == 1 and "... 4 more op types" in out
    assert "  ... and 1 more (use --json)" in out  # 2 zero-gradient nodes, 1 shown


def test_inspect_prints_size_node_count_and_sha256(models, capsys):
    """A file cut exactly between two nodes is valid protobuf and loads with
    fewer nodes; the node count and the hash tell it from the original."""
    folder, sign, _ = models
    data = open(sign, "rb").read()
    graph = frozen.load(sign)
    head = tf.compat.v1.GraphDef()
    head.node.extend(graph.node[:-1])  # all but the last node, 'y'
    cut = head.SerializeToString(deterministic=True)  # as frozen.save writes
    assert data.startswith(cut) and len(cut) < len(data)
    truncated = folder / "truncated.pb"
    truncated.write_bytes(cut)
    assert len(frozen.load(truncated).node) == len(graph.node) - 1  # loads silently
    for path, raw, nodes in ((sign, data, len(graph.node)),
                             (str(truncated), cut, len(graph.node) - 1)):
        sha = hashlib.sha256(raw).hexdigest()
        code, out, _ = _main(capsys, "inspect", path)
        assert out.splitlines()[0] == "%s: %d bytes, sha256 %s" % (path, len(raw), sha)
        assert out.splitlines()[1].startswith("%s: %d nodes," % (path, nodes))
        code, out, _ = _main(capsys, "inspect", path, "--json")
        report = json.loads(out)
        assert (report["sha256"], report["bytes"], report["nodes"]) == (sha, len(raw), nodes)
