"""graph_override.migrate and `graph-override migrate`: the codemod's rules,
formatting, idempotence, bad input and the command line."""

import glob
import os
import stat

import libcst as cst
import pytest

from graph_override import cli, migrate
from graph_override.migrate import tables as _migrate_tables
from graph_override.migrate import SourceError, migrate_source

# The same on every TensorFlow release by construction (it rewrites source text (libcst);
# no TensorFlow or Keras code runs):
# compat/run.sh runs it under the newest release only.
pytestmark = pytest.mark.release_independent

CASES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), os.pardir,
                                      "migration_cases", "*.py")))
CASES = [c for c in CASES if not c.endswith("conftest.py")]

HEADER = "import tensorflow.compat.v1 as tf\n"


def _migrate(body, **kwargs):
    return migrate_source(HEADER + body, "m.py", **kwargs)


@pytest.mark.parametrize("path", CASES, ids=os.path.basename)
def test_idempotent_on_every_case(path):
    with open(path) as f:
        text = f.read()
    once = migrate_source(text, path)
    twice = migrate_source(once.text, path)
    assert twice.text == once.text
    assert twice.changed == ()
    cst.parse_module(once.text)  # the result parses


def test_one_line_scope_keeps_its_comment():
    r = _migrate('with tf.get_default_graph().gradient_override_map({"Sign": '
                 '"Identity"}): y = tf.sign(x)  # keep me\n')
    assert r.text == HEADER + ("from graph_override.tf2 import op_with_gradient\n"
                               'y = op_with_gradient(tf.sign, "Identity")(x)  # keep me\n')


def test_comments_and_formatting_outside_the_scope_survive():
    body = ('def f(x):\n'
            '    # leading comment\n'
            '    a = tf.abs( x )   # odd spacing stays\n'
            '    with tf.get_default_graph().gradient_override_map(\n'
            '            {"Sign": "Identity"}):  # header comment\n'
            '        y = tf.sign(a)  # trailing\n'
            '        # end of block\n'
            '    return y\n')
    r = _migrate(body)
    assert "    # leading comment\n    a = tf.abs( x )   # odd spacing stays\n" in r.text
    assert ("    # header comment\n"
            '    y = op_with_gradient(tf.sign, "Identity")(a)  # trailing\n'
            "    # end of block\n    return y\n") in r.text


def test_comments_inside_the_removed_map_move_above_the_body():
    r = _migrate('def f(x, g):\n'
                 '    with g.gradient_override_map({"Sign": "A",  # binarize\n'
                 '                                  "Round": "B"}):  # header\n'
                 '        y = tf.sign(tf.round(x))\n'
                 '    return y\n')
    assert ("    # binarize\n    # header\n"
            '    y = op_with_gradient(tf.sign, "A")(op_with_gradient(tf.round, "B")(x))\n'
            ) in r.text


def test_other_items_of_the_with_stay():
    r = _migrate('def f(x):\n'
                 '    with tf.name_scope("q"), tf.get_default_graph().gradient_'
                 'override_map({"Round": "Identity"}):\n'
                 '        return tf.round(x)\n')
    assert 'with tf.name_scope("q"):\n        return op_with_gradient(tf.round, ' \
           '"Identity")(x)\n' in r.text


def test_several_keys_nested_scopes_and_nested_calls():
    r = _migrate('def f(x, g):\n'
                 '    with g.gradient_override_map({"Sign": "A", "Floor": "B"}):\n'
                 '        y = tf.sign(tf.floor(x))\n'
                 '        with g.gradient_override_map({"Sign": "C"}):\n'
                 '            z = tf.sign(y)\n'
                 '    return tf.sign(z)\n')
    assert 'y = op_with_gradient(tf.sign, "A")(op_with_gradient(tf.floor, "B")(x))' in r.text
    assert 'z = op_with_gradient(tf.sign, "C")(y)' in r.text
    assert "    return tf.sign(z)\n" in r.text  # outside any scope: unchanged
    assert r.untouched == ()


def test_graph_variable_kept_while_still_used():
    r = _migrate('def f(x):\n'
                 '    g = tf.get_default_graph()\n'
                 '    with g.gradient_override_map({"Sign": "Identity"}):\n'
                 '        y = tf.sign(x)\n'
                 '    return y, g.get_operations()\n')
    assert "g = tf.get_default_graph()" in r.text


def test_registration_kept_for_other_files_and_names_resolved_at_run_time():
    body = ('@tf.RegisterGradient("SignSTE")\n'
            'def ste(op, grad):\n'
            '    return grad\n'
            'def f(x):\n'
            '    with tf.get_default_graph().gradient_override_map({"Sign": "SignSTE"}):\n'
            '        return tf.sign(x)\n')
    alone = _migrate(body)
    # Code this tool does not see may use the name: the registration stays.
    assert '@tf.RegisterGradient("SignSTE")' in alone.text
    assert "op_with_gradient(tf.sign, ste)(x)" in alone.text
    (kept,) = alone.kept
    assert kept.line == 2 and "kept the registration of 'SignSTE'" in kept.message
    assert "take the function itself" in kept.message
    assert "code this tool does not see" in kept.message
    other = _migrate(body, keep_registrations={"SignSTE"})
    assert '@tf.RegisterGradient("SignSTE")' in other.text
    assert "another file of this run" in other.kept[0].message
    # A file that only uses the name (registered elsewhere) keeps the name.
    user = _migrate('def f(x):\n'
                    '    with tf.get_default_graph().gradient_override_map({"Sign": "SignSTE"}):\n'
                    '        return tf.sign(x)\n')
    assert 'op_with_gradient(tf.sign, "SignSTE")(x)' in user.text


def test_name_conflict_and_existing_import():
    r = _migrate('op_with_gradient = None\n'
                 'with tf.get_default_graph().gradient_override_map({"Sign": "Identity"}):\n'
                 '    y = tf.sign(x)\n')
    assert "import op_with_gradient as _go_op_with_gradient" in r.text
    assert '_go_op_with_gradient(tf.sign, "Identity")(x)' in r.text
    r = _migrate('from graph_override.tf2 import op_with_gradient\n'
                 'with tf.get_default_graph().gradient_override_map({"Sign": "Identity"}):\n'
                 '    y = tf.sign(x)\n')
    assert r.text.count("import op_with_gradient") == 1


def test_a_module_alias_made_by_assignment_is_followed():
    r = migrate_source("import tensorflow as tf\n"
                       "tf1 = tf.compat.v1\n"
                       "def f(x):\n"
                       "    with tf1.get_default_graph().gradient_override_map("
                       '{"Sign": "Identity"}):\n'
                       "        return tf1.sign(x)\n", "m.py")
    assert r.untouched == ()
    assert 'return op_with_gradient(tf1.sign, "Identity")(x)' in r.text
    # Bound twice: which one a call sees is not known, so nothing is guessed.
    twice = migrate_source("import tensorflow as tf\n"
                           "tf1 = tf.compat.v1\n"
                           "tf1 = other\n"
                           "def f(x):\n"
                           "    with tf.compat.v1.get_default_graph()."
                           'gradient_override_map({"Sign": "Identity"}):\n'
                           "        return tf1.sign(x)\n", "m.py")
    assert twice.text == twice.original and len(twice.untouched) == 1


def test_import_goes_after_docstring_and_future_imports():
    r = migrate_source('"""Doc."""\nfrom __future__ import division\n' + HEADER +
                       'with tf.get_default_graph().gradient_override_map({"Sign": '
                       '"Identity"}):\n    y = tf.sign(x)\n')
    assert r.text.startswith('"""Doc."""\nfrom __future__ import division\n' + HEADER +
                             "from graph_override.tf2 import op_with_gradient\n")


UNSAFE = [
    ("with g.gradient_override_map(m):\n    y = tf.sign(x)\n", "built at run time"),
    ('with g.gradient_override_map({"Sign": "A", **more}):\n    y = tf.sign(x)\n',
     "unpacks '**more'"),
    ('with g.gradient_override_map({KEY: "A"}):\n    y = tf.sign(x)\n',
     "not a string literal"),
    ('with g.gradient_override_map({"Sign": cfg.name}):\n    y = tf.sign(x)\n',
     "computed at run time"),
    ('with g.gradient_override_map({"Sign": "A"}) as s:\n    y = tf.sign(x)\n',
     "bound with 'as"),
    ('with g.gradient_override_map({"Sign": "A"}):\n    y = helper(x)\n',
     "helper(...) calls a function that this file neither defines nor imports"),
    ('with g.gradient_override_map({"Sign": "A"}):\n    y = tf.nn.conv2d(x, w, 1, "SAME")\n',
     "not in this tool's table"),
    # a library layer creates its mapped op among others (MatMul, BiasAdd):
    # op_with_gradient refuses such a function, so the advice says so
    ('with g.gradient_override_map({"Relu": "A"}):\n'
     '    y = tf.contrib.layers.fully_connected(x, 4)\n',
     "if it creates one such op and no other op, write the call as "
     "op_with_gradient(tf.contrib.layers.fully_connected, <gradient>)(...) by hand (op_with_gradient "
     "takes a function of exactly one op); else wrap only that op by hand"),
    ('with g.gradient_override_map({"MatMul": "A"}):\n    y = tf.matmul(x, w)\n',
     "depending on its arguments"),
    ('with g.gradient_override_map({"ZerosLike": "A"}):\n    y = tf.zeros_like(x)\n',
     "creates Const or Fill or ZerosLike depending on its arguments"),
    ('with g.gradient_override_map({"Shape": "A"}):\n    y = tf.shape(x)\n',
     "creates Const or Shape depending on its arguments"),
    ('with g.gradient_override_map({"PyFunc": "N"}):\n    y = tf.py_func(f, [x], tf.float32)\n',
     "in TF2 use tf.py_function inside a tf.custom_gradient"),
    ('with g.gradient_override_map({"Mul": "A"}):\n    y = x * w\n',
     "the operator 'x * w' may create Mul"),
    ('with g.gradient_override_map({"Sign": "A"}):\n    f = lambda: tf.sign(x)\n',
     "defined inside the override scope"),
    ('with make_graph().gradient_override_map({"Sign": "A"}):\n    y = tf.sign(x)\n',
     "computed by a call"),
    ('ctx = g.gradient_override_map({"Sign": "A"})\n', "outside a 'with' statement"),
]


@pytest.mark.parametrize("body,reason", UNSAFE, ids=[u[1] for u in UNSAFE])
def test_unsafe_sites_are_left_untouched_and_listed(body, reason):
    r = _migrate("g = tf.get_default_graph()\n" + body)
    assert r.text == r.original
    assert len(r.untouched) >= 1
    assert reason in r.untouched[0].message
    assert r.untouched[0].line >= 3 and r.untouched[0].filename == "m.py"
    # Each reason says what to do, not only what is wrong.
    for site in r.untouched:
        assert any(w in site.message for w in _WHAT_TO_DO), site.message


_WHAT_TO_DO = ("by hand", "migrate again", "move ", "wrap ", "rewrite ", "patch ",
               "write it", "define it")


@pytest.mark.parametrize("name_expr,removed", [
    ('"FlipGradient%d" % self.num_calls', True),
    ('"reverse_gradient{}".format(self.num_calls)', True),
    ('"GradientReversal%d" % uuid.uuid4()', True),
    ('"PyFuncGrad" + str(np.random.randint(0, 1E+8))', False),  # draws from np.random
    ('"Flip%d" % next(COUNTER)', False),                        # advances a counter
])
def test_counter_name_variants(name_expr, removed):
    r = _migrate('class Flip(object):\n'
                 '    def __call__(self, x, l=1.0):\n'
                 '        grad_name = %s\n'
                 '        @tf.RegisterGradient(grad_name)\n'
                 '        def _flip(op, grad):\n'
                 '            return [tf.negative(grad) * l]\n'
                 '        with tf.get_default_graph().gradient_override_map(\n'
                 '                {"Identity": grad_name}):\n'
                 '            return tf.identity(x)\n' % name_expr)
    assert "return op_with_gradient(tf.identity, _flip)(x)" in r.text
    assert "RegisterGradient" not in r.text
    assert ("grad_name = " not in r.text) == removed


def test_a_counter_name_used_elsewhere_keeps_its_registration():
    r = _migrate('class Flip(object):\n'
                 '    def __call__(self, x):\n'
                 '        grad_name = "Flip%d" % self.num_calls\n'
                 '        @tf.RegisterGradient(grad_name)\n'
                 '        def _flip(op, grad):\n'
                 '            return [-grad]\n'
                 '        self.names.append(grad_name)\n'
                 '        with tf.get_default_graph().gradient_override_map(\n'
                 '                {"Identity": grad_name}):\n'
                 '            return tf.identity(x)\n')
    assert "return op_with_gradient(tf.identity, _flip)(x)" in r.text
    assert "@tf.RegisterGradient(grad_name)" in r.text
    assert 'grad_name = "Flip%d" % self.num_calls' in r.text
    (kept,) = r.kept
    assert kept.line == 5 and "also used on line 8" in kept.message


def test_imports_only_the_removed_registration_used_go():
    body = ('def f(x, n):\n'
            '    name = "G%d" % n\n'
            '    @ops.RegisterGradient(name)\n'
            '    def g(op, grad):\n'
            '        return grad\n'
            '    with tf.get_default_graph().gradient_override_map({"Identity": name}):\n'
            '        return tf.identity(x)\n')
    alone = migrate_source(HEADER + "from tensorflow.python.framework import ops\n"
                           + body, "m.py")
    assert "import ops" not in alone.text
    shared = migrate_source(HEADER + "from tensorflow.python.framework import ops, "
                            "dtypes\n" + body + "y = dtypes.float32\n", "m.py")
    assert "from tensorflow.python.framework import dtypes\n" in shared.text
    still_used = migrate_source(HEADER + "from tensorflow.python.framework import ops\n"
                                + body + "z = ops.convert_to_tensor(1.0)\n", "m.py")
    assert "from tensorflow.python.framework import ops\n" in still_used.text
    # Not TensorFlow's: another module may import the name from this one.
    other = migrate_source(HEADER + "from mylib import ops\n" + body, "m.py")
    assert "from mylib import ops\n" in other.text


def test_a_key_no_call_matches_is_dropped_and_reported():
    # tensorpack's DoReFa maps "Floor" but calls tf.round: the entry never
    # re-routed anything, so dropping it keeps the legacy behaviour.
    r = _migrate('def q(x, G):\n'
                 '    with G.gradient_override_map({"Floor": "Identity", "sign": "A"}):\n'
                 '        return tf.round(x * 3.0) / 3.0\n')
    assert "    return tf.round(x * 3.0) / 3.0\n" in r.text
    assert "gradient_override_map" not in r.text and r.untouched == ()
    notes = [s.message for s in r.changed if "matches no op" in s.message]
    assert len(notes) == 2 and "'Floor'" in notes[0] and "'sign'" in notes[1]


def test_conditionally_defined_registrations_stay_names():
    r = _migrate('GRAD_DEFINED = False\n'
                 'def make(G):\n'
                 '    global GRAD_DEFINED\n'
                 '    if not GRAD_DEFINED:\n'
                 '        @tf.RegisterGradient("FGGrad")\n'
                 '        def grad_fg(op, x):\n'
                 '            return x\n'
                 '    GRAD_DEFINED = True\n'
                 '    def fg(x):\n'
                 '        with G.gradient_override_map({"Identity": "FGGrad"}):\n'
                 '            return tf.identity(x)\n'
                 '    return fg\n'
                 'try:\n'
                 '    @tf.RegisterGradient("Guarded")\n'
                 '    def guarded(op, grad):\n'
                 '        return grad\n'
                 'except KeyError:\n'
                 '    pass\n'
                 'def h(x):\n'
                 '    with tf.get_default_graph().gradient_override_map({"Sign": "Guarded"}):\n'
                 '        return tf.sign(x)\n')
    # On a second call grad_fg is never defined: only the name is safe.
    assert 'op_with_gradient(tf.identity, "FGGrad")(x)' in r.text
    assert '@tf.RegisterGradient("FGGrad")' in r.text
    assert 'op_with_gradient(tf.sign, "Guarded")(x)' in r.text
    assert '@tf.RegisterGradient("Guarded")' in r.text


def test_an_unsafe_inner_scope_keeps_the_outer_one():
    r = _migrate('with g.gradient_override_map({"Sign": "A"}):\n'
                 '    y = tf.sign(x)\n'
                 '    with g.gradient_override_map(m):\n'
                 '        z = tf.sign(y)\n')
    assert r.text == r.original
    assert [s.line for s in r.untouched] == [4]


def test_parse_error_is_a_source_error():
    with pytest.raises(SourceError, match=r"broken\.py:2:.*cannot parse"):
        migrate_source("x = 1\ndef f(:\n", "broken.py")
    with pytest.raises(TypeError):
        migrate_source(b"x = 1\n", "bytes.py")


def test_crlf_and_declared_encoding_round_trip(tmp_path):
    path = tmp_path / "latin.py"
    text = ('# -*- coding: latin-1 -*-\r\n' + HEADER.replace("\n", "\r\n") +
            '# caf\xe9\r\nwith tf.get_default_graph().gradient_override_map('
            '{"Sign": "Identity"}):\r\n    y = tf.sign(x)\r\n')
    path.write_bytes(text.encode("latin-1"))
    (res,) = migrate.migrate_paths([str(path)], write=True)
    assert res.written and res.error is None
    data = path.read_bytes()
    assert b"# caf\xe9\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert b'y = op_with_gradient(tf.sign, "Identity")(x)\r\n' in data


# ---------------------------------------------------------------------------
# Files, trees and the command line.

LEGACY = HEADER + (
    '\n\n@tf.RegisterGradient("TreeSTE")\n'
    'def _ste(op, grad):\n'
    '    return grad\n\n\n'
    'def binarize(x):\n'
    '    with tf.get_default_graph().gradient_override_map({"Sign": "TreeSTE"}):\n'
    '        return tf.sign(x)\n')
LEFT = HEADER + ('\n\ndef dynamic(x, m):\n'
                 '    with tf.get_default_graph().gradient_override_map(m):\n'
                 '        return tf.sign(x)\n')


def _tree(root):
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / "pkg" / "model.py").write_text(LEGACY)
    (root / "pkg" / "sub" / "other.py").write_text(LEGACY.replace("TreeSTE", "OtherSTE"))
    (root / "pkg" / "notes.txt").write_text("with g.gradient_override_map(x): pass\n")
    (root / ".hidden" / "skip.py").write_text(LEGACY)
    (root / "pkg" / "clean.py").write_text("x = 1\n")
    return root


def _snapshot(root):
    return {p: open(p, "rb").read() for p in glob.glob(str(root / "**"), recursive=True)
            if os.path.isfile(p)}


def test_cli_diff_by_default_writes_nothing(tmp_path, capsys):
    root = _tree(tmp_path)
    before = _snapshot(root)
    assert cli.main(["migrate", str(root)]) == 0
    out, err = capsys.readouterr()
    assert _snapshot(root) == before
    assert out.count("+++ b/") == 2  # model.py and sub/other.py, not .hidden
    assert '+    return op_with_gradient(tf.sign, _ste)(x)' in out
    assert "model.py:11: tf.sign(...) -> op_with_gradient(tf.sign, _ste)(...)" in err
    assert "3 file(s) read, 2 would be migrated, 0 site(s) left" in err


def test_cli_write_is_atomic_and_keeps_permissions(tmp_path, capsys):
    root = _tree(tmp_path)
    model = root / "pkg" / "model.py"
    os.chmod(model, 0o640)
    assert cli.main(["migrate", str(root), "--write"]) == 0
    capsys.readouterr()
    text = model.read_text()
    assert "op_with_gradient(tf.sign, _ste)(x)" in text
    cst.parse_module(text)
    assert stat.S_IMODE(os.stat(model).st_mode) == 0o640
    assert not glob.glob(str(root / "pkg" / ".*.tmp"))
    assert (root / ".hidden" / "skip.py").read_text() == LEGACY
    assert (root / "pkg" / "clean.py").read_text() == "x = 1\n"
    # Idempotent: a second run finds nothing to change.
    assert cli.main(["migrate", str(root)]) == 0
    out, _ = capsys.readouterr()
    assert out == ""


def test_a_registration_another_file_uses_is_kept(tmp_path):
    (tmp_path / "a.py").write_text(LEGACY)  # registers and uses TreeSTE
    (tmp_path / "b.py").write_text(HEADER + (
        'def f(x):\n'
        '    with tf.get_default_graph().gradient_override_map({"Sign": "TreeSTE"}):\n'
        '        return tf.sign(x)\n'))
    (tmp_path / "c.py").write_text(LEGACY.replace("TreeSTE", "OnlyHere"))
    a, b, c = migrate.migrate_paths([str(tmp_path)])
    assert '@tf.RegisterGradient("TreeSTE")' in a.result.text
    assert "op_with_gradient(tf.sign, _ste)(x)" in a.result.text
    assert 'op_with_gradient(tf.sign, "TreeSTE")(x)' in b.result.text
    assert '@tf.RegisterGradient("OnlyHere")' in c.result.text
    assert "another file of this run" in a.result.kept[0].message
    assert "code this tool does not see" in c.result.kept[0].message


def test_cli_exit_1_when_sites_are_left(tmp_path, capsys):
    path = tmp_path / "left.py"
    path.write_text(LEFT)
    assert cli.main(["migrate", str(path), "--write"]) == 1
    _, err = capsys.readouterr()
    assert "left:    %s:5: the override map 'm' is built at run time" % path in err
    assert path.read_text() == LEFT


def test_cli_unparsable_file_is_never_written(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text(LEGACY + "def broken(:\n")
    good = tmp_path / "good.py"
    good.write_text(LEGACY)
    assert cli.main(["migrate", str(tmp_path), "--write"]) == 2
    _, err = capsys.readouterr()
    assert "bad.py:12:" in err and "cannot parse" in err and "nothing was" in err
    assert bad.read_text() == LEGACY + "def broken(:\n"
    assert "op_with_gradient" in good.read_text()  # the others still migrate


@pytest.mark.parametrize("make,match", [
    (lambda d: d / "missing.py", "no such file or directory"),
    (lambda d: (d / "notes.txt").write_text("x") and d / "notes.txt",
     "not a Python file"),
    (lambda d: (d / "bin.py").write_bytes(b"\xff\xfe\x00bad") and d / "bin.py",
     "cannot decode"),
    (lambda d: os.symlink(d / "gone.py", d / "link.py") or d / "link.py",
     "no such file or directory"),
])
def test_cli_bad_input_exit_2(tmp_path, capsys, make, match):
    path = make(tmp_path)
    assert cli.main(["migrate", str(path)]) == 2
    _, err = capsys.readouterr()
    assert match in err and str(path) in err


def test_write_through_a_symlink_keeps_the_link(tmp_path, capsys):
    real = tmp_path / "real.py"
    real.write_text(LEGACY)
    link = tmp_path / "link.py"
    os.symlink(real, link)
    assert cli.main(["migrate", str(link), "--write"]) == 0
    capsys.readouterr()
    assert os.path.islink(link)
    assert "op_with_gradient(tf.sign, _ste)(x)" in real.read_text()


def test_cli_permission_denied_is_exit_2(tmp_path, capsys, monkeypatch):
    path = tmp_path / "locked.py"
    path.write_text(LEGACY)

    real_open = os.open

    def denied(file, *args, **kwargs):
        if os.fspath(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    # Tests may run as root, where chmod 000 does not stop a read.
    monkeypatch.setattr(os, "open", denied)
    assert cli.main(["migrate", str(path), "--write"]) == 2
    _, err = capsys.readouterr()
    assert "%s: cannot be read: Permission denied" % path in err
    monkeypatch.undo()
    assert path.read_text() == LEGACY


def test_write_refuses_a_file_changed_meanwhile(tmp_path):
    path = tmp_path / "f.py"
    path.write_text("new = 1\n")
    with pytest.raises(SourceError, match="changed while it was being migrated"):
        migrate.write_atomically(str(path), b"x = 2\n", expected=b"old = 1\n")
    assert path.read_text() == "new = 1\n"
    assert os.listdir(tmp_path) == ["f.py"]


def test_canonical_names():
    assert _migrate_tables.canonical("tensorflow.compat.v1.math.sign") == "math.sign"
    assert _migrate_tables.canonical("tensorflow.python.framework.ops.RegisterGradient") \
        == "RegisterGradient"
    assert _migrate_tables.canonical("numpy.sign") is None
    assert _migrate_tables.op_types_of("math.sign") == {"Sign"}


# ---------------------------------------------------------------------------
# Any mix of convertible and unsafe scopes: the result parses, a second run
# changes nothing, and every unsafe scope survives byte for byte.

SAFE = [
    'with g.gradient_override_map({"Sign": "Identity"}):\n    y = tf.sign(x)\n',
    'with tf.get_default_graph().gradient_override_map({"Round": "Identity"}):\n'
    '    y = tf.round(x * 3.0) / 3.0\n',
    'with g.gradient_override_map({"Identity": "Flip"}):  # note\n'
    '    y = tf.identity(x)\n    z = tf.abs(y)\n',
]


def _block(index, indent):
    body = (SAFE + [u[0] for u in UNSAFE])[index]
    return "".join(indent + line + "\n" for line in body.splitlines())


@pytest.fixture(scope="module")
def hypothesis_mix():
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    return hypothesis, st.lists(st.tuples(
        st.integers(0, len(SAFE) + len(UNSAFE) - 1), st.booleans()),
        min_size=1, max_size=6)


def test_any_mix_is_idempotent_and_keeps_unsafe_scopes(hypothesis_mix):
    hypothesis, blocks = hypothesis_mix

    @hypothesis.settings(max_examples=40, deadline=None, derandomize=True)
    @hypothesis.given(blocks)
    def check(spec):
        parts = ["g = tf.get_default_graph()\n"]
        for n, (index, in_function) in enumerate(spec):
            if in_function:
                parts.append("def f%d(x, g):\n" % n + _block(index, "    "))
            else:
                parts.append(_block(index, ""))
        once = _migrate("".join(parts))
        cst.parse_module(once.text)
        assert _migrate(once.text[len(HEADER):]).text == once.text
        for index, in_function in spec:
            if index >= len(SAFE):
                assert _block(index, "    " if in_function else "") in once.text

    check()


def test_bench_script_runs():
    import importlib.util
    path = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "bench_migrate.py")
    spec = importlib.util.spec_from_file_location("bench_migrate", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    r = bench.run(2, 60)
    assert r["files"] == 2 and r["lines"] >= 120
    # per file: a run-time map, a scope that yields and its caller
    assert r["sites_left"] == 6
    assert r["registrations_kept"] == 2  # each file's module-level one
    assert r["sites_changed"] > 0 and r["lines_per_second"] > 0
    assert r["plain_lines_per_second"] > 0


def test_an_item_between_two_override_items_leaves_the_scope_alone():
    body = ('g = tf.get_default_graph()\n'
            'def f(x):\n'
            '    with g.gradient_override_map({"Sign": "Identity"}), '
            'tf.name_scope(str(tf.sign(x))), '
            'g.gradient_override_map({"Round": "Identity"}):\n'
            '        return tf.round(x)\n')
    r = _migrate(body)
    assert r.text == HEADER + body
    assert any("runs under only part of the map" in s.message for s in r.untouched)


# ---------------------------------------------------------------------------
# Scopes whose ops are created out of the tool's sight, registrations other
# code may still use, a project's own wrappers, and true reasons.

GUIDED = HEADER + (
    "import contextlib\n"
    "from tensorflow.python.ops import gen_nn_ops\n\n\n"
    '@tf.RegisterGradient("GuidedReLU")\n'
    "def _guided_relu_grad(op, grad):\n"
    "    return tf.where(0. < grad, gen_nn_ops.relu_grad(grad, op.outputs[0]),\n"
    "                    tf.zeros_like(grad))\n\n\n"
    "@contextlib.contextmanager\n"
    "def guided_relu():\n"
    "    g = tf.get_default_graph()\n"
    '    with g.gradient_override_map({"Relu": "GuidedReLU"}):\n'
    "        yield\n\n\n"
    "def saliency(x):\n"
    "    with guided_relu():\n"
    "        y = tf.nn.relu(x)\n"
    "    return tf.gradients(y, x)[0]\n")


def test_a_scope_that_yields_is_left_and_its_callers_listed(tmp_path, capsys):
    r = migrate_source(GUIDED, "guided.py")
    assert r.text == GUIDED  # the scope, the registration: all kept
    assert r.changed == () and r.kept == ()
    lines = {s.line: s.message for s in r.untouched}
    assert "the override scope yields ('yield')" in lines[16]
    assert "wrap those ops where they are created" in lines[16]
    assert "guided_relu(...) calls guided_relu (this file:13)" in lines[20]
    assert "yields inside the map" in lines[20]
    assert not any("directly" in s.message for s in r.untouched + r.changed)
    path = tmp_path / "guided.py"
    path.write_text(GUIDED)
    assert cli.main(["migrate", str(path), "--write"]) == 1
    assert path.read_text() == GUIDED
    assert "left:    %s:16:" % path in capsys.readouterr()[1]


@pytest.mark.parametrize("inside", [
    "        yield x\n",
    "        value = yield\n",
    "        yield from inner()\n",
    "        await asyncio.sleep(0)\n",
])
def test_every_way_of_suspending_in_a_scope_is_left(inside):
    prefix = "async " if "await" in inside else ""
    r = _migrate('%sdef f(x):\n'
                 '    with tf.get_default_graph().gradient_override_map({"Sign": "A"}):\n'
                 '%s'
                 '        return tf.sign(x)\n' % (prefix, inside))
    assert r.text == r.original
    assert any("the override scope %s" % ("awaits" if "await" in inside else "yields")
               in s.message for s in r.untouched)


SHARED_USER = HEADER + (
    "def binarize(x):\n"
    '    with tf.get_default_graph().gradient_override_map({"Sign": "TestSharedSignGrad"}):\n'
    "        return tf.sign(x)\n")
SHARED_OWNER = HEADER + (
    '@tf.RegisterGradient("TestSharedSignGrad")\n'
    "def _shared_sign_grad(op, grad):\n"
    "    x = op.inputs[0]\n"
    "    return grad * tf.cast(tf.abs(x) <= 1.0, grad.dtype)\n\n\n"
    "def binarize_owned(x):\n"
    '    with tf.get_default_graph().gradient_override_map({"Sign": "TestSharedSignGrad"}):\n'
    "        return tf.sign(x)\n")


def test_separate_runs_never_remove_a_registration_another_file_uses(tmp_path, capsys):
    import importlib.util
    import numpy as np
    import tensorflow as tf
    (tmp_path / "shared_user.py").write_text(SHARED_USER)
    (tmp_path / "shared_owner.py").write_text(SHARED_OWNER)
    # b.py first, a.py in a later run (or an interrupted --write of the tree).
    assert cli.main(["migrate", str(tmp_path / "shared_owner.py"), "--write"]) == 0
    err = capsys.readouterr()[1]
    assert "kept:    %s:2: kept the registration of 'TestSharedSignGrad'" % (
        tmp_path / "shared_owner.py") in err
    assert cli.main(["migrate", str(tmp_path / "shared_user.py"), "--write"]) == 0
    owner_text = (tmp_path / "shared_owner.py").read_text()
    assert '@tf.RegisterGradient("TestSharedSignGrad")' in owner_text
    assert "op_with_gradient(tf.sign, _shared_sign_grad)(x)" in owner_text
    modules = {}
    for name in ("shared_owner", "shared_user"):
        spec = importlib.util.spec_from_file_location(name, tmp_path / (name + ".py"))
        modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(modules[name])
    x = tf.constant([-2.0, -1.0, 0.0, 0.5, 1.0, 1.5])
    for fn in (modules["shared_user"].binarize, modules["shared_owner"].binarize_owned):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        np.testing.assert_array_equal(tape.gradient(y, x).numpy(),
                                      [0, 1, 1, 1, 1, 0])


WRAPPER_LIB = HEADER + (
    "import contextlib\n\n\n"
    "def override(mapping):\n"
    "    return tf.get_default_graph().gradient_override_map(mapping)\n\n\n"
    "@contextlib.contextmanager\n"
    "def overriding(mapping):\n"
    "    with tf.get_default_graph().gradient_override_map(mapping):\n"
    "        yield\n\n\n"
    "class Binarizer(object):\n"
    "    def scope(self):\n"
    '        return tf.get_default_graph().gradient_override_map({"Sign": "Identity"})\n\n'
    "    def __call__(self, x):\n"
    "        with self.scope():\n"
    "            return tf.sign(x)\n")
WRAPPER_USER = HEADER + (
    "import wrapper_lib\n"
    "from wrapper_lib import override, overriding\n\n\n"
    "def f(x):\n"
    '    with override({"Sign": "Identity"}):\n'
    "        a = tf.sign(x)\n"
    '    with overriding({"Round": "Identity"}):\n'
    "        b = tf.round(x)\n"
    '    with wrapper_lib.override({"Floor": "Identity"}):\n'
    "        c = tf.floor(x)\n"
    "    return a + b + c\n")


def test_calls_of_a_projects_own_wrappers_are_listed(tmp_path, capsys):
    (tmp_path / "wrapper_lib.py").write_text(WRAPPER_LIB)
    (tmp_path / "wrapper_user.py").write_text(WRAPPER_USER)
    lib, user = migrate.migrate_paths([str(tmp_path)])
    where = str(tmp_path / "wrapper_lib.py")
    lines = {s.line: s.message for s in user.result.untouched}
    assert sorted(lines) == [7, 9, 11]
    assert ("override(...) calls override (%s:5), which opens gradient_override_map "
            "for its caller: it opens the map with its parameter 'mapping'" % where
            ) in lines[7]
    assert "(Sign: \"Identity\")" in lines[7]
    assert "overriding (%s:10)" % where in lines[9]
    assert "wrapper_lib.override(...)" in lines[11] and "(Floor: " in lines[11]
    assert not user.result.modified
    lib_lines = {s.line: s.message for s in lib.result.untouched}
    assert "override() is a wrapper around gradient_override_map" in lib_lines[6]
    assert "overriding() is a wrapper around gradient_override_map" in lib_lines[11]
    assert "self.scope(...) calls scope (this file:16)" in lib_lines[20]
    assert "hands the gradient_override_map context to its caller" in lib_lines[20]
    assert not lib.result.modified
    assert cli.main(["migrate", str(tmp_path)]) == 1
    err = capsys.readouterr()[1]
    assert "wrapper_user.py:7:" in err and "0 would be migrated" in err


def test_a_class_based_context_manager_is_a_wrapper_too():
    r = _migrate("class GuidedBackprop(object):\n"
                 "    def __enter__(self):\n"
                 "        self._scope = tf.get_default_graph().gradient_override_map(\n"
                 '            {"Relu": "GuidedRelu"})\n'
                 "        return self._scope.__enter__()\n\n"
                 "    def __exit__(self, *exc):\n"
                 "        return self._scope.__exit__(*exc)\n\n"
                 "def saliency(x):\n"
                 "    with GuidedBackprop():\n"
                 "        return tf.nn.relu(x)\n")
    assert r.text == r.original
    lines = {s.line: s.message for s in r.untouched}
    assert sorted(lines) == [4, 12]
    assert "GuidedBackprop(...) calls GuidedBackprop (this file:2)" in lines[12]
    assert "its __enter__ hands the gradient_override_map context" in lines[12]
    assert "GuidedBackprop() is a wrapper around gradient_override_map" in lines[4]


def test_a_method_wrapper_named_like_the_map_leaves_graph_scopes_alone():
    r = _migrate("class Model(object):\n"
                 "    def gradient_override_map(self, mapping):\n"
                 "        return self.graph.gradient_override_map(mapping)\n\n"
                 "def f(x):\n"
                 '    with tf.get_default_graph().gradient_override_map({"Sign": "Identity"}):\n'
                 "        return tf.sign(x)\n")
    assert 'return op_with_gradient(tf.sign, "Identity")(x)' in r.text
    assert [s.line for s in r.untouched] == [4]  # the wrapper's own body


def test_a_function_that_closes_the_map_inside_itself_is_no_wrapper():
    r = _migrate("def apply(x, grad):\n"
                 '    with tf.get_default_graph().gradient_override_map({"Sign": grad}):\n'
                 "        return tf.sign(x)\n\n"
                 'y = apply(x, "Identity")\n')
    assert r.text == r.original
    (site,) = r.untouched  # its own scope; its callers' ops are not re-routed
    assert site.line == 3 and "gradient name 'grad'" in site.message
    assert "wrapper" not in site.message


def test_a_function_that_calls_its_parameter_inside_the_map_is_a_wrapper():
    r = _migrate("def overriding(build):\n"
                 '    with tf.get_default_graph().gradient_override_map({"Sign": "Identity"}):\n'
                 "        return build()\n\n"
                 "y = overriding(lambda: tf.sign(x))\n")
    assert r.text == r.original
    lines = {s.line: s.message for s in r.untouched}
    assert sorted(lines) == [4, 6]
    assert "overriding() is a wrapper around gradient_override_map" in lines[4]
    assert "it calls its parameter 'build' inside the map" in lines[6]


@pytest.mark.parametrize("body,converted", [
    # consumed where it is made: its calls run inside the scope
    ("        return tf.stack(list(tf.sign(v) for v in xs))\n", True),
    ("        ys = tuple(tf.sign(v) for v in xs)\n        return ys\n", True),
    ("        for y in (tf.sign(v) for v in xs):\n            out.append(y)\n"
     "        return out\n", True),
    # made here, consumed later (or by code this tool cannot see)
    ("        ys = (tf.sign(v) for v in xs)\n    return list(ys)\n", False),
    ("        return (tf.sign(v) for v in xs)\n", False),
])
def test_generator_expressions_are_converted_only_when_consumed_in_the_scope(
        body, converted):
    r = _migrate("def f(xs, out):\n"
                 '    with tf.get_default_graph().gradient_override_map({"Sign": "Identity"}):\n'
                 + body)
    assert ('op_with_gradient(tf.sign, "Identity")(v)' in r.text) == converted
    assert bool(r.untouched) != converted
    if not converted:
        assert "generator expression" in r.untouched[0].message


@pytest.mark.parametrize("inside,after", [
    ("y = tf.identity(x)", "assert y.op.type == 'Identity'"),
    ("y = tf.identity(x)", "print(y.name)"),
    ("y = tf.identity(x)", "g = y.graph"),
    ("t = tf.identity(x).op.type", "y = x"),
])
def test_code_that_inspects_a_converted_output_leaves_the_scope(inside, after):
    r = _migrate("def f(x):\n"
                 '    with tf.get_default_graph().gradient_override_map({"Identity": "A"}):\n'
                 "        %s\n"
                 "    %s\n"
                 "    return y\n" % (inside, after))
    assert r.text == r.original
    (site,) = r.untouched
    assert site.line == (4 if ".op" in inside else 5)
    assert "looks at the output of tf.identity(...) (line 4)" in site.message


_REBIND_SCOPE = ("def f(x, c, xs):\n"
                 '    with tf.get_default_graph().gradient_override_map({"Identity": "A"}):\n'
                 "        y = tf.identity(x)\n")


@pytest.mark.parametrize("after, inspected", [
    # rebound on every path before the read: the read is not the output's
    ("    y = y * 2\n    print(y.name)\n", False),
    ("    y = tf.abs(y)\n    if c:\n        print(y.op.type)\n", False),
    ("    y = y * 2\n    for v in xs:\n        print(y.name)\n", False),
    # read first, on a path without the rebinding, or read later by a
    # function that may run at any time: the output's
    ("    print(y.name)\n    y = y * 2\n", True),
    ("    y = tf.abs(y.op.outputs[0])\n", True),
    ("    if c:\n        y = y * 2\n    print(y.name)\n", True),
    ("    for v in xs:\n        y = y * v\n    print(y.name)\n", True),
    ("    y = y * 2\n    return lambda: y.name\n", True),
    ("    y = y * 2\n    return [y.name for v in xs]\n", True),
    ("    z = y * 2\n    print(y.name)\n", True),
], ids=["rebound", "rebound-if-read", "rebound-loop-read", "read-first",
        "read-in-rebinding", "rebound-if", "rebound-loop", "lambda", "comprehension",
        "other-name"])
def test_a_name_rebound_before_the_read_no_longer_holds_the_output(after, inspected):
    """tensorpack's ternarize(): ``w = w * mask_np`` after the scope, then
    ``tf.summary.histogram(w.name, w)``: the name is the product's."""
    r = _migrate(_REBIND_SCOPE + after)
    assert (r.text == r.original) == inspected
    assert [("looks at the output of tf.identity(...) (line 4)" in s.message)
            for s in r.untouched] == ([True] if inspected else [])


@pytest.mark.parametrize("between, listed", [
    ("    ys = list(ys)\n", False),   # a list by the time the scope reads it
    ("    print(ys)\n", True),
    ("    if c:\n        ys = list(ys)\n", True),
], ids=["rebound", "not-rebound", "rebound-if"])
def test_a_generator_name_rebound_before_the_scope_is_no_generator_there(between, listed):
    r = _migrate("def f(xs, c):\n"
                 "    ys = (tf.abs(v) for v in xs)\n" + between +
                 '    with tf.get_default_graph().gradient_override_map({"Sign": "Identity"}):\n'
                 "        return [tf.sign(y) for y in ys]\n")
    assert (r.text == r.original) == listed
    assert [("'ys' is a generator expression made before the override scope (line 3)"
             in s.message) for s in r.untouched] == ([True] if listed else [])


def test_keras_session_graph_in_the_with_item_goes_with_the_scope():
    r = migrate_source("from tensorflow.keras import backend as K\n"
                       "import tensorflow as tf\n"
                       "def f(x):\n"
                       '    with K.get_session().graph.gradient_override_map({"Sign": "Identity"}):\n'
                       "        return tf.sign(x)\n", "k.py")
    assert r.untouched == ()
    assert "get_session" not in r.text
    assert 'return op_with_gradient(tf.sign, "Identity")(x)' in r.text


def test_a_keras_session_graph_still_used_is_kept_and_said_so():
    r = migrate_source("from tensorflow.keras import backend as K\n"
                       "import tensorflow as tf\n"
                       "def f(x):\n"
                       "    g = K.get_session().graph\n"
                       '    with g.gradient_override_map({"Sign": "Identity"}):\n'
                       "        y = tf.sign(x)\n"
                       "    return g.get_tensor_by_name('input:0'), y\n", "k.py")
    assert 'y = op_with_gradient(tf.sign, "Identity")(x)' in r.text
    assert "    g = K.get_session().graph\n" in r.text
    (kept,) = r.kept
    assert kept.line == 4 and "the name is also used on line 7" in kept.message
    assert "Keras 3 has no get_session" in kept.message


def test_calls_this_tool_cannot_see_into_are_one_line_per_scope():
    r = _migrate("from mylib import helper, other\n"
                 "def f(x):\n"
                 '    with tf.get_default_graph().gradient_override_map({"Sign": "Identity"}):\n'
                 "        a = helper(x)\n"
                 "        b = other(a)\n"
                 "        c = tf.unknown_op(b)\n"
                 "        return tf.sign(c)\n")
    assert r.text == r.original
    (site,) = r.untouched
    assert site.line == 5 and "helper(...) is imported from mylib" in site.message
    assert "so do 2 more call(s) in this scope: other(a) (line 6), " \
        "tf.unknown_op(b) (line 7)" in site.message


@pytest.mark.parametrize("line,must", [
    ("tf.import_graph_def(graph_def, name='')",
     ["imports a graph", "graph-override patch MODEL"]),
    ("tf.train.import_meta_graph('model.meta')",
     ["imports a graph", "graph_override.frozen"]),
    ("saver.restore(sess, 'model.ckpt')",
     ["method call", "Saver.restore", "move it out of the override scope"]),
    ("tf.gradients(y, x)",
     ["builds gradient ops", "second-order", "move the call out of the scope"]),
    ("layer.apply(x)", ["method call", "wrap each such op in the method's code"]),
    ("local_helper(x)", ["a function defined in this file (line 3)",
                         "wrap each such op inside it"]),
    ("np_helper(x)", ["imported from mylib"]),
    ("fn(x)", ["a function passed in or computed at run time"]),
])
def test_each_reason_is_true_of_its_line_and_says_what_to_do(line, must):
    r = _migrate("from mylib import np_helper\n"
                 "def local_helper(x):\n"
                 "    return x\n"
                 "def f(x, y, sess, saver, layer, graph_def, fn):\n"
                 '    with tf.get_default_graph().gradient_override_map({"Sign": "A"}):\n'
                 "        z = %s\n"
                 "        return tf.sign(x)\n" % line)
    assert r.text == r.original
    (site,) = r.untouched
    assert site.line == 7
    for text in must:
        assert text in site.message
    assert "convert the op inside the helper" not in site.message


@pytest.mark.parametrize("lookup", [
    "t = g.get_tensor_by_name('input:0')",
    # look-ups and factories that return Python objects
    "scope = tf.get_variable_scope()",
    "init = tf.zeros_initializer()",
])
def test_graph_lookups_create_no_ops_and_need_no_reason(lookup):
    r = _migrate("def f(t):\n"
                 "    g = tf.get_default_graph()\n"
                 '    with g.gradient_override_map({"Sign": "Identity"}):\n'
                 "        %s\n"
                 "        return tf.sign(t)\n" % lookup)
    assert r.untouched == ()
    assert 'return op_with_gradient(tf.sign, "Identity")(t)' in r.text


def test_a_gradient_function_that_calls_tf_gradients_is_left():
    r = _migrate('@tf.RegisterGradient("Surrogate")\n'
                 "def _surrogate(op, grad):\n"
                 "    x = op.inputs[0]\n"
                 "    return tf.gradients(tf.tanh(x), x, grad)[0]\n"
                 "def f(x):\n"
                 '    with tf.get_default_graph().gradient_override_map({"Sign": "Surrogate"}):\n'
                 "        return tf.sign(x)\n")
    assert r.text == r.original
    (site,) = r.untouched
    assert site.line == 8
    assert "_surrogate calls tf.gradients (line 5), which works only in graph mode" \
        in site.message


def test_migrate_never_imports_tensorflow(tmp_path):
    import subprocess
    import sys
    (tmp_path / "m.py").write_text(GUIDED)
    code = ("import sys\nfrom graph_override import cli\n"
            "status = cli.main(['migrate', %r])\n"
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
            "sys.exit(status)\n" % str(tmp_path / "m.py"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 1, proc.stderr


# ---------------------------------------------------------------------------
# The table of TensorFlow functions, checked against TensorFlow itself.

_BINARY = {"multiply", "maximum", "minimum", "subtract", "less", "less_equal",
           "greater", "greater_equal", "equal", "add", "divide", "truediv", "matmul"}


def _table_args(tf, name, shape):
    """Arguments for table function `name` (canonical), on placeholders."""
    base = name.rsplit(".", 1)[-1]
    x = tf.compat.v1.placeholder(tf.float32, shape)
    y = tf.compat.v1.placeholder(tf.float32, shape)
    m = tf.compat.v1.placeholder(tf.float32, [None, 4] if shape[0] is None else [3, 4])
    mt = tf.compat.v1.placeholder(tf.float32, [4, None] if shape[0] is None else [4, 3])
    b = tf.compat.v1.placeholder(tf.float32, [4])
    cond = tf.compat.v1.placeholder(tf.bool, shape)
    return {
        "bias_add": (m, b), "stack": ([x, y],), "concat": ([x, y], 0),
        "split": (x, 2), "where": (cond, x, y), "cast": (x, tf.int32),
        "reshape": (x, [-1]), "clip_by_value": (x, -1.0, 1.0),
        "constant": (1.0,), "convert_to_tensor": (1.0,), "zeros": ([2],),
        "ones": ([2],), "transpose": (m,), "matmul": (m, mt),
        "name_scope": ("s",), "variable_scope": ("s",), "device": ("/cpu:0",),
        "control_dependencies": ([],), "get_default_graph": (),
        "as_dtype": ("float32",),
        "get_variable_scope": (), "get_collection": ("losses",),
        "zeros_initializer": (), "ones_initializer": (),
        "constant_initializer": (), "glorot_uniform_initializer": (),
        "random_normal_initializer": (), "truncated_normal_initializer": (),
        "floatx": (), "epsilon": (), "placeholder": (tf.float32,),
    }.get(base, (x, y) if base in _BINARY else (x,))


def _resolve(tf, name):
    found = []
    for namespace in (tf.compat.v1, tf):
        obj = namespace
        for part in name.split("."):
            obj = getattr(obj, part, None)
        if obj is not None:
            found.append(obj)
    return found


def test_no_name_is_both_a_single_op_and_several():
    several = {n for n, types in _migrate_tables.OP_TYPES.items() if len(types) != 1}
    assert not several & _migrate_tables._SINGLE_NAMES
    single = {n for n in _migrate_tables.OP_TYPES if n in _migrate_tables._SINGLE_NAMES}
    assert single == set(_migrate_tables._SINGLE_NAMES)


@pytest.mark.parametrize("name", sorted(_migrate_tables.OP_TYPES))
def test_every_table_entry_is_what_tensorflow_builds(name):
    """Builds each table function with TensorFlow (tf.compat.v1 and TF2
    names, unknown and static shapes) and reads the created ops' types."""
    import tensorflow as tf
    declared = _migrate_tables.OP_TYPES[name]
    fns = _resolve(tf, name)
    assert fns, "%s is in the table but neither tf.compat.v1 nor tf has it" % name
    for fn in fns:
        if not callable(fn):
            assert isinstance(fn, tf.DType) and not declared
            continue
        for shape in ([None], [4]):
            with tf.Graph().as_default() as graph:
                args = _table_args(tf, name, shape)
                before = {op.name for op in graph.get_operations()}
                fn(*args)
                created = [op for op in graph.get_operations() if op.name not in before]
            built = {op.type for op in created} - {"Const"}
            single = _migrate_tables.op_types_of(name)
            if len(single) == 1 and name in _migrate_tables._SINGLE_NAMES:
                (want,) = single
                assert built == {want}, (name, shape, sorted(built))
                assert created[-1].type == want, (name, shape, created[-1].type)
            else:
                assert built <= declared, (name, shape, sorted(built - declared))


# ---------------------------------------------------------------------------
# The analysis is composed: each idiom receives one declared Context.

def test_every_field_of_the_analysis_context_is_documented():
    import dataclasses
    from graph_override.migrate.analysis import context
    for cls in (context.Context, context.Facts):
        doc = cls.__doc__.split("Attributes:", 1)[1]
        for field in dataclasses.fields(cls):
            assert "\n      %s: " % field.name in doc, (cls.__name__, field.name)


def test_each_idiom_is_functions_of_the_context_not_a_mixin():
    import inspect
    from graph_override.migrate.analysis import (body, boundary, dead_code,
                                                 registrations, scopes, wrappers)
    for module in (body, boundary, dead_code, registrations, scopes, wrappers):
        public = [getattr(module, name) for name in module.__all__]
        functions = [f for f in public if inspect.isfunction(f)]
        assert functions, module.__name__
        assert not [c for c in public if inspect.isclass(c)
                    and c.__name__.endswith("Mixin")], module.__name__
        takes_ctx = [f for f in functions
                     if next(iter(inspect.signature(f).parameters)) == "ctx"]
        assert takes_ctx, module.__name__
