"""Public vision programs run with lazytensor as written (only their imports change; torchvision is a stand-in,
tests/stand_ins.py): pytorch/examples' DCGAN (transposed convolutions, BatchNorm2d, in-place LeakyReLU) and
VAE run end to end as scripts, and kuangliu/pytorch-cifar's ResNet18 (a CNN with BatchNorm) trains through
its own model code. Each runs under both frameworks from the same weights (a PyTorch checkpoint the
script itself loads, or torch.save -> lt.load); the noise a program samples comes from one stream both
share (program_compare.SharedRandom), and the losses agree with PyTorch's step by step."""
import re
import sys

import numpy as np
import pytest

import lazytensor as lt
import program_compare as C
import program_loader as P
import stand_ins


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _stand_in_torchvision(monkeypatch, pictures, labels, saved=None):
    for name, module in stand_ins.torchvision(pictures, labels, saved).items():
        monkeypatch.setitem(sys.modules, name, module)


def _printed(pattern, text):
    """Each printed match of `pattern` as a list of its groups' numbers."""
    return [[float(v) for v in (m if isinstance(m, tuple) else (m,))] for m in re.findall(pattern, text)]


# ---- pytorch/examples: dcgan -----------------------------------------------------------------------------
DCGAN = {"dcgan": "pytorch_examples/dcgan/main.py"}
DCGAN_STEP = (r"Loss_D: ([-0-9.]+) Loss_G: ([-0-9.]+) D\(x\): ([-0-9.]+) D\(G\(z\)\): ([-0-9.]+) / "
              r"([-0-9.]+)")


def test_dcgan_script_trains_like_pytorch(torch, tmp_path, monkeypatch, capsys):
    pictures, labels = stand_ins.images(4, (3, 64, 64), seed=1)  # one batch: each epoch is one step
    saved = {"torch": [], "lazytensor": []}
    small = ["--dataset", "fake", "--batchSize", "4", "--nz", "8", "--ngf", "4", "--ndf", "4", "--manualSeed", "7"]
    # the starting weights: PyTorch's initialization (the script's weights_init), saved as the script's
    # --netG/--netD checkpoints, which both runs load
    _stand_in_torchvision(monkeypatch, pictures, labels)
    start = P.load("torch", DCGAN, argv=small + ["--niter", "0", "--outf", str(tmp_path / "start")])["dcgan"]
    torch.save(start.netG.state_dict(), tmp_path / "g0.pth")
    torch.save(start.netD.state_dict(), tmp_path / "d0.pth")
    printed = {}
    for fw in ("torch", "lazytensor"):
        _stand_in_torchvision(monkeypatch, pictures, labels, saved[fw])
        framework = torch if fw == "torch" else lt
        capsys.readouterr()
        P.load(fw, DCGAN, framework_module=C.SharedRandom(framework, seed=3),
               argv=small + ["--niter", "3", "--netG", str(tmp_path / "g0.pth"), "--netD", str(tmp_path / "d0.pth"),
                             "--outf", str(tmp_path / fw)])
        printed[fw] = _printed(DCGAN_STEP, capsys.readouterr().out)
    assert len(printed["torch"]) == 3 and len(printed["lazytensor"]) == 3
    np.testing.assert_allclose(printed["lazytensor"], printed["torch"], atol=1.01e-4)  # printed to 4 decimals
    assert saved["lazytensor"] == [(s, p.replace("torch", "lazytensor")) for s, p in saved["torch"]]
    for net in ("netG", "netD"):  # the checkpoints the script saved after its last epoch, read by PyTorch
        ours, theirs = (torch.load(tmp_path / fw / f"{net}_epoch_2.pth") for fw in ("lazytensor", "torch"))
        assert ours.keys() == theirs.keys()
        for k in theirs:
            np.testing.assert_allclose(ours[k].numpy(), theirs[k].numpy(), rtol=1e-4, atol=1e-5, err_msg=k)


# ---- pytorch/examples: vae -------------------------------------------------------------------------------
VAE = {"vae": "pytorch_examples/vae/main.py"}
VAE_TRAIN = r"Train Epoch: \d+ \[\d+/\d+ \(\d+%\)\]\tLoss: ([0-9.]+)"


def test_vae_trains_and_tests_like_pytorch(torch, monkeypatch, capsys):
    pictures, labels = stand_ins.images(32, (1, 28, 28), seed=2)
    _stand_in_torchvision(monkeypatch, pictures, labels)
    weights, printed = C.Weights(), {}
    order = list(np.random.default_rng(4).permutation(32))
    for fw in ("torch", "lazytensor"):
        framework = torch if fw == "torch" else lt
        program = P.load(fw, VAE, framework_module=C.SharedRandom(framework, seed=6),
                         argv=["--batch-size", "8", "--log-interval", "1", "--no-accel"])["vae"]
        C.same_weights(torch, weights, fw, program.model)
        # the program's loader shuffles with its framework's generator; both take one shared order instead
        program.train_loader = program.torch.utils.data.DataLoader(program.train_loader.dataset, batch_size=8,
                                                                   sampler=order)
        capsys.readouterr()
        for epoch in (1, 2):  # its __main__ part: train, then test, each epoch
            program.train(epoch)
            program.test(epoch)
        printed[fw] = capsys.readouterr().out
    train = {fw: [v for (v,) in _printed(VAE_TRAIN, text)] for fw, text in printed.items()}
    assert len(train["torch"]) == 8
    C.close(train["lazytensor"], train["torch"])
    tested = {fw: [v for (v,) in _printed(r"Test set loss: ([0-9.]+)", text)] for fw, text in printed.items()}
    assert len(tested["torch"]) == 2
    np.testing.assert_allclose(tested["lazytensor"], tested["torch"], rtol=1e-5)


def test_vae_script_runs_end_to_end_as_written(monkeypatch, tmp_path, capsys):
    pictures, labels = stand_ins.images(16, (1, 28, 28), seed=2)
    saved = []
    _stand_in_torchvision(monkeypatch, pictures, labels, saved)
    monkeypatch.chdir(tmp_path)
    P.load("lazytensor", VAE, main=True, argv=["--batch-size", "8", "--epochs", "2"])
    out = capsys.readouterr().out
    assert out.count("====> Epoch:") == 2 and out.count("====> Test set loss:") == 2
    assert saved == [((16, 1, 28, 28), "results/reconstruction_1.png"), ((64, 1, 28, 28), "results/sample_1.png"),
                     ((16, 1, 28, 28), "results/reconstruction_2.png"), ((64, 1, 28, 28), "results/sample_2.png")]


# ---- kuangliu/pytorch-cifar: ResNet18 -------------------------------------------------------------------
RESNET = {"models.resnet": "pytorch_cifar/models/resnet.py"}


def test_cifar_resnet18_trains_like_pytorch_and_keeps_its_running_statistics(torch):
    """The repository's main.py step (SGD with momentum and weight decay, cosine schedule, cross-entropy) on
    its ResNet18; then eval mode, which normalizes with the running statistics training kept."""
    pictures, labels = stand_ins.images(16, (3, 32, 32), seed=3)
    weights, losses, evaluated = C.Weights(), {}, {}
    for fw in ("torch", "lazytensor"):
        framework = torch if fw == "torch" else lt
        resnet = P.load(fw, RESNET)["models.resnet"]
        net = resnet.ResNet18()
        C.same_weights(torch, weights, fw, net)
        criterion = framework.nn.CrossEntropyLoss()
        # (lr 1e-3, not the script's 0.1: at 0.1 a batch of 8 random pictures throws this BatchNorm network
        # into a chaotic regime where float32's rounding grows past any tolerance, in either framework)
        optimizer = framework.optim.SGD(net.parameters(), lr=0.001, momentum=0.9, weight_decay=5e-4)
        scheduler = framework.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=200)
        inputs, targets = framework.tensor(pictures), framework.tensor(labels)
        net.train()
        losses[fw] = []
        for step in range(3):
            batch = slice(8 * (step % 2), 8 * (step % 2) + 8)
            optimizer.zero_grad()
            outputs = net(inputs[batch])
            loss = criterion(outputs, targets[batch])
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses[fw].append(loss.item())
            _, predicted = outputs.max(1)
            predicted.eq(targets[batch]).sum().item()
        net.eval()
        with framework.no_grad():
            evaluated[fw] = np.asarray(net(inputs).numpy())
    # 1e-4, not 1e-5: twenty BatchNorm layers over a batch of 8 amplify the rounding of the convolutions'
    # float32 sums (whose order depends on the thread count), though the first step's gradients agree to 5e-6
    C.close(losses["lazytensor"], losses["torch"], tolerance=1e-4)
    np.testing.assert_allclose(evaluated["lazytensor"], evaluated["torch"], rtol=1e-3, atol=1e-4)
