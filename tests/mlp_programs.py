"""Issue 15's third program, written the way PyTorch users write it, for PyTorch and lazytensor alike:
`make(torch)` returns an MLP classifier (CrossEntropyLoss, Adam), a regression MLP (MSELoss, SGD with
momentum), their optimizers and one training step. Nothing here is lazytensor-specific."""


def make(torch):
    nn = torch.nn

    class Classifier(nn.Module):
        def __init__(self, n_in, hidden, n_classes):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                     nn.Linear(hidden, n_classes))

        def forward(self, x):
            return self.net(x)

    class Regressor(nn.Module):
        def __init__(self, n_in, hidden):
            super().__init__()
            self.hidden = nn.Linear(n_in, hidden)
            self.act = nn.SiLU()
            self.out = nn.Linear(hidden, 1)

        def forward(self, x):
            return self.out(self.act(self.hidden(x))).squeeze(-1)

    def classifier_optimizer(model):
        return torch.optim.Adam(model.parameters(), lr=1e-2)

    def regressor_optimizer(model):
        return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train_step(model, opt, loss_fn, x, y):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return Classifier, Regressor, classifier_optimizer, regressor_optimizer, train_step
