"""scripts/finetune_frozen.py end to end, small: a Session-trained BNN is
frozen, fine-tuned through frozen.to_function, saved, and reproduced by
plain TensorFlow in a fresh process."""

import re

import pytest


@pytest.mark.slow
def test_finetune_frozen_small_run(load_script, tmp_path, capsys):
    script = load_script("finetune_frozen")
    code = script.main(["--workdir", str(tmp_path), "--hidden", "32", "--epochs", "2",
                        "--target", "1.01"])
    out = capsys.readouterr().out
    assert code == 1  # the target of 101% cannot be reached: exit 1, all else done
    session = float(re.search(r"in a Session: test accuracy ([\d.]+)", out).group(1))
    converted = float(re.search(r"trainable variables .*; test accuracy ([\d.]+)",
                                out).group(1))
    assert converted == session  # the frozen graph in TF2 is the Session's model
    assert "3. to_function: 6 trainable variables" in out  # kernel, gamma, beta x 2 layers
    assert len(re.findall(r"fine-tune epoch \d", out)) == 2
    assert ("plain TensorFlow (graph_override imported: False) reproduces the "
            "fine-tuned logits bitwise: True") in out
    assert "6 of 6 weights get a nonzero gradient" in out
