"""Sliding windows (convolution and pooling): im2col gathers every window of a (N, C, H, W) input into
(C, kh, kw, N, Ho, Wo) (channels and offsets first: a convolution is then one matrix product over all
images, W (O, C kh kw) @ cols (C kh kw, N Ho Wo)); col2im adds such windows back into (N, C, H, W),
im2col's gradient.

attrs: kernel (kh, kw), stride, padding (added on both sides of H and W), dilation, `pad_value` (what
the padding reads: 0 for convolutions, -inf for max pooling) and, for col2im, the input `shape`.
Both copy or add values one window offset at a time, so each result element is one value or the sum
of the same values in the same order (offsets in row-major order) on every backend.
"""
import numpy as np


def out_size(size, k, stride, pad, dilation):
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


def _geometry(attrs, shape):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = attrs["kernel"], attrs["stride"], attrs["padding"], attrs["dilation"]
    H, W = shape[2], shape[3]
    return kh, kw, sh, sw, ph, pw, dh, dw, out_size(H, kh, sh, ph, dh), out_size(W, kw, sw, pw, dw)


def im2col(attrs, x):
    kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo = _geometry(attrs, x.shape)
    N, C, H, W = x.shape
    if ph or pw:
        xp = np.full((N, C, H + 2 * ph, W + 2 * pw), attrs.get("pad_value", 0.0), dtype=x.dtype)
        xp[:, :, ph:ph + H, pw:pw + W] = x
    else:
        xp = x
    out = np.empty((C, kh, kw, N, Ho, Wo), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            window = xp[:, :, i * dh:i * dh + sh * (Ho - 1) + 1:sh, j * dw:j * dw + sw * (Wo - 1) + 1:sw]
            out[:, i, j] = window.transpose(1, 0, 2, 3)
    return out


def col2im(attrs, cols):
    N, C, H, W = attrs["shape"]
    kh, kw, sh, sw, ph, pw, dh, dw, Ho, Wo = _geometry(attrs, attrs["shape"])
    out = np.zeros((N, C, H + 2 * ph, W + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            window = out[:, :, i * dh:i * dh + sh * (Ho - 1) + 1:sh, j * dw:j * dw + sw * (Wo - 1) + 1:sw]
            window += cols[:, i, j].transpose(1, 0, 2, 3)
    return np.ascontiguousarray(out[:, :, ph:ph + H, pw:pw + W])


WINDOW_KERNELS = {"im2col": im2col, "col2im": col2im}


def _grouped(attrs, cols):
    """cols (C, kh, kw, N, Ho, Wo) as (groups, Cg kh kw, N Ho Wo)."""
    G = attrs["groups"]
    return cols.reshape(G, cols.shape[0] // G * cols.shape[1] * cols.shape[2], -1)


def conv_product(attrs, x, cols, w):
    """A convolution's output (N, O, Ho, Wo) from its windows: per group, W_g (Og, Cg kh kw) @ cols_g
    (one product over every image). `x` (the input the windows came from) is not read: it is an operand
    so that the gradient of the input is one node (conv_input_grad)."""
    G = attrs["groups"]
    C, kh, kw, N, Ho, Wo = cols.shape
    O = w.shape[0]
    out = np.matmul(w.reshape(G, O // G, -1), _grouped(attrs, cols))  # (G, Og, N Ho Wo)
    return np.ascontiguousarray(out.reshape(O, N, Ho, Wo).transpose(1, 0, 2, 3))


def conv_input_grad(attrs, w, g):
    """The gradient of a convolution's input: col2im of W^T @ g, per group."""
    G = attrs["groups"]
    N, O, Ho, Wo = g.shape
    C, kh, kw = attrs["shape"][1], attrs["kernel"][0], attrs["kernel"][1]
    gp = np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(G, O // G, N * Ho * Wo)
    dcols = np.matmul(w.reshape(G, O // G, -1).transpose(0, 2, 1), gp)  # (G, Cg kh kw, N Ho Wo)
    return col2im(attrs, dcols.reshape(C, kh, kw, N, Ho, Wo))


WINDOW_KERNELS.update({"conv_product": conv_product, "conv_input_grad": conv_input_grad})
