"""L-BFGS with PyTorch's algorithm, defaults and closure protocol (`step(closure)` re-evaluates the loss
and gradients as often as the search needs). The parameters are handled as one flat vector; the
scalar decisions (convergence, curvature) read scalars on the host, as PyTorch's does."""
from .. import grad_mode
from ..creation import zeros
from ..shape_ops import cat
from .optimizer import Optimizer


class LBFGS(Optimizer):
    """`step(closure)` runs up to `max_iter` iterations of L-BFGS with a fixed step `lr` (the first one
    scaled by min(1, 1/|g|_1)); line_search_fn="strong_wolfe" is not supported."""

    def __init__(self, params, lr=1.0, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if line_search_fn is not None:
            raise NotImplementedError(f"LBFGS: line_search_fn={line_search_fn!r} is not supported; use None "
                                      f"(a fixed step of lr)")
        max_eval = max_iter * 5 // 4 if max_eval is None else max_eval
        super().__init__(params, {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                                  "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                                  "history_size": history_size, "line_search_fn": None})
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS: supports one parameter group only (as PyTorch's)")
        self._group = self.param_groups[0]
        self._state = {"func_evals": 0, "n_iter": 0}

    def _flat_grad(self):
        return cat([(p.grad if p.grad is not None else zeros(*p.shape, dtype=p.dtype)).reshape(-1)
                    for p in self._group["params"]]).realize()

    def _add(self, step_size, direction):
        offset = 0
        for p in self._group["params"]:
            n = p.numel()
            p._node = (p + direction[offset:offset + n].reshape(p.shape) * step_size).realize()._node
            offset += n

    def step(self, closure):
        """One optimization step: returns the loss the closure gave first."""
        if closure is None:
            raise ValueError("LBFGS.step needs a closure that recomputes the loss and its gradients")
        group, state = self._group, self._state
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change, history = group["tolerance_grad"], group["tolerance_change"], group["history_size"]

        with grad_mode.enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        with grad_mode.no_grad():
            flat_grad = self._flat_grad()
            if float(flat_grad.abs().max()) <= tol_grad:
                return orig_loss
            d, t = state.get("d"), state.get("t")
            old_dirs, old_stps, ro = state.setdefault("old_dirs", []), state.setdefault("old_stps", []), \
                state.setdefault("ro", [])
            H_diag = state.get("H_diag", 1)
            prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
            n_iter = 0
            while n_iter < max_iter:
                n_iter += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d = -flat_grad
                    old_dirs.clear(), old_stps.clear(), ro.clear()
                    H_diag = 1
                else:
                    y = flat_grad - prev_flat_grad
                    s = d * t
                    ys = float((y * s).sum())
                    if ys > 1e-10:
                        if len(old_dirs) == history:
                            old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                        old_dirs.append(y.realize())
                        old_stps.append(s.realize())
                        ro.append(1.0 / ys)
                        H_diag = ys / float((y * y).sum())
                    al = [None] * len(old_dirs)
                    q = -flat_grad
                    for i in range(len(old_dirs) - 1, -1, -1):
                        al[i] = float((old_stps[i] * q).sum()) * ro[i]
                        q = q - old_dirs[i] * al[i]
                    d = q * H_diag
                    for i in range(len(old_dirs)):
                        be_i = float((old_dirs[i] * d).sum()) * ro[i]
                        d = d + old_stps[i] * (al[i] - be_i)
                    d = d.realize()
                prev_flat_grad = flat_grad
                prev_loss = loss
                t = min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr if state["n_iter"] == 1 else lr
                gtd = float((flat_grad * d).sum())
                if gtd > -tol_change:
                    break
                self._add(t, d)
                ls_evals = 0
                if n_iter != max_iter:
                    with grad_mode.enable_grad():
                        loss = float(closure())
                    flat_grad = self._flat_grad()
                    ls_evals = 1
                evals += ls_evals
                state["func_evals"] += ls_evals
                if n_iter == max_iter or evals >= max_eval:
                    break
                if float(flat_grad.abs().max()) <= tol_grad:
                    break
                if float((d * t).abs().max()) <= tol_change:
                    break
                if abs(loss - prev_loss) < tol_change:
                    break
            state.update(d=d, t=t, H_diag=H_diag, prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    def state_dict(self):
        raise NotImplementedError("LBFGS.state_dict: saving L-BFGS history is not supported")
