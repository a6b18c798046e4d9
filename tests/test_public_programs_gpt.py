"""GPT training programs from a course and a repository run with lazytensor as written (only their imports
change; tiktoken's GPT-2 table is a byte-level stand-in, tests/stand_ins.py): rasbt/LLMs-from-scratch's
chapter-5 trainer (`main()` end to end, and its `train_model_simple` against PyTorch step by step from the
same weights), and karpathy/nanoGPT's train.py with mixed precision and DistributedDataParallel (see
tests/test_nanogpt_train_script.py)."""
import numpy as np
import pytest

import lazytensor as lt
import program_compare as C
import program_loader as P
import stand_ins


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


# ---- rasbt/LLMs-from-scratch, chapter 5 ------------------------------------------------------------------
COURSE = {"previous_chapters": "llms_from_scratch/ch05/previous_chapters.py",
          "gpt_train": "llms_from_scratch/ch05/gpt_train.py"}
COURSE_REMOVED = {"gpt_train": ["import requests"]}  # (the book's text download, skipped when the file exists)
SMALL = {"vocab_size": 256, "context_length": 16, "emb_dim": 32, "n_heads": 4, "n_layers": 2, "drop_rate": 0.1,
         "qkv_bias": False}
SETTINGS = {"learning_rate": 5e-4, "num_epochs": 2, "batch_size": 2, "weight_decay": 0.1}


@pytest.fixture
def course(monkeypatch, tmp_path):
    """The course's files loaded per framework, run from a folder holding its text file."""
    for name, module in stand_ins.tiktoken().items():
        monkeypatch.setitem(__import__("sys").modules, name, module)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "the-verdict.txt").write_text(stand_ins.prose(400, seed=8))
    return lambda fw: P.load(fw, COURSE, COURSE_REMOVED)["gpt_train"]


def test_course_train_model_simple_matches_pytorch_step_by_step(torch, course, capsys):
    text = stand_ins.prose(400, seed=8)
    weights, results, printed = C.Weights(), {}, {}
    for fw in ("torch", "lazytensor"):
        framework = torch if fw == "torch" else lt
        program = course(fw)
        config = dict(SMALL, drop_rate=0.0)  # (the two frameworks draw different dropout masks)
        model = program.GPTModel(config)
        C.same_weights(torch, weights, fw, model)
        optimizer = framework.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.1)
        tokenizer = stand_ins.ByteTokenizer()
        # the course's own loaders, unshuffled (a shuffle draws from each framework's generator)
        train_loader = program.create_dataloader_v1(text[:1500], batch_size=2, max_length=16, stride=16,
                                                    drop_last=True, shuffle=False)
        val_loader = program.create_dataloader_v1(text[1500:], batch_size=2, max_length=16, stride=16,
                                                  drop_last=False, shuffle=False)
        capsys.readouterr()
        results[fw] = program.train_model_simple(model, train_loader, val_loader, optimizer, "cpu", num_epochs=1,
                                                 eval_freq=4, eval_iter=2, start_context="every effort moves you",
                                                 tokenizer=tokenizer)
        printed[fw] = capsys.readouterr().out
    train, val, seen = results["lazytensor"]
    assert len(train) >= 10 and seen == results["torch"][2]
    C.close(train, results["torch"][0])
    C.close(val, results["torch"][1])
    # the sample it prints after the epoch: 50 greedy tokens from the same weights
    assert printed["lazytensor"].splitlines()[-1] == printed["torch"].splitlines()[-1]


def test_course_main_trains_as_written_as_well_as_pytorch(torch, course, capsys):
    """main() as the book runs it (its seed, shuffled batches, dropout 0.1): each framework draws its own
    initial weights and order, so the two runs are compared as statistics: both start near ln(256), both
    learn, and they end within 10% of each other."""
    finals = {}
    for fw in ("torch", "lazytensor"):
        train_losses, val_losses, tokens_seen, model = course(fw).main(SMALL, SETTINGS)
        assert abs(train_losses[0] - np.log(256)) < 0.5, train_losses
        assert train_losses[-1] < train_losses[0] - 1.0 and val_losses[-1] < val_losses[0] - 1.0
        finals[fw] = (train_losses[-1], val_losses[-1], tokens_seen[-1])
    assert finals["lazytensor"][2] == finals["torch"][2]
    np.testing.assert_allclose(finals["lazytensor"][:2], finals["torch"][:2], rtol=0.1)
    assert capsys.readouterr().out.count("Ep 2 (Step") > 0
