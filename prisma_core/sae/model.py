"""TopK sparse autoencoder (Gao et al., 2024): h = TopK_k(ReLU(W_enc (x - b_pre) + b_enc)), x_hat = W_dec^T h + b_pre"""

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn


class SAEOutput(NamedTuple):
    """Everything one forward pass computes, so training and analysis never recompute it."""

    recon: torch.Tensor
    """Reconstruction x_hat [batch, d]."""
    latents: torch.Tensor
    """Dense sparse code h [batch, n_latents]: k entries per row are kept, all others are 0."""
    top_values: torch.Tensor
    """The k kept activations per row, largest first [batch, k] (>= 0)."""
    top_indices: torch.Tensor
    """Latent index of each kept activation [batch, k]."""
    pre_acts: torch.Tensor
    """ReLU(W_enc (x - b_pre) + b_enc) before TopK [batch, n_latents]; AuxK picks dead latents from it."""


class TopKSAE(nn.Module):
    """TopK sparse autoencoder with a shared pre-encoder bias.

    State (all float32, saved as is by `save_sae`):
        b_pre  [d]            robust centre of the data, subtracted before encoding and added back after decoding
        W_enc  [n_latents, d] encoder rows
        b_enc  [n_latents]    encoder bias
        W_dec  [n_latents, d] decoder rows: row i is feature i's direction in embedding space (kept at unit norm)

    Both weight matrices are stored latent-major ([n_latents, d]) so a feature's encoder and decoder vectors are
    rows, and decoding k active latents is a gather of k rows rather than a dense [d, n_latents] product.
    """

    def __init__(self, d: int, n_latents: int, k: int, generator: torch.Generator | None = None) -> None:
        """Random unit-norm decoder rows, tied encoder (W_enc = W_dec here, W_d^T in the paper's layout), zero biases.

        `generator` (a CPU torch.Generator) makes the initial weights reproducible. Training replaces b_pre with a
        robust centre of the data.
        """
        super().__init__()
        if not 0 < k <= n_latents:
            raise ValueError(f"k={k} must be between 1 and n_latents={n_latents}")
        self.d = d
        self.n_latents = n_latents
        self.k = k
        directions = torch.randn(n_latents, d, generator=generator)
        directions /= directions.norm(dim=1, keepdim=True)
        self.b_pre = nn.Parameter(torch.zeros(d))
        self.W_enc = nn.Parameter(directions.clone())
        self.b_enc = nn.Parameter(torch.zeros(n_latents))
        self.W_dec = nn.Parameter(directions)

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """[batch, d] -> ReLU'd encoder activations before TopK [batch, n_latents].

        W_enc (x - b_pre) + b_enc is computed as W_enc x + (b_enc - W_enc b_pre): b_pre's gradient then comes from a
        matrix-vector product instead of a [batch, n_latents] x [n_latents, d] one, a third of a training step.
        """
        return F.relu(F.linear(x, self.W_enc, self.b_enc - self.W_enc @ self.b_pre))

    def encode_topk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[batch, d] -> (values [batch, k] largest first, indices [batch, k])."""
        return self.pre_activations(x).topk(self.k, dim=1, sorted=True)

    def decode(self, top_values: torch.Tensor, top_indices: torch.Tensor) -> torch.Tensor:
        """Sparse code as (values [batch, k], indices [batch, k]) -> reconstruction [batch, d]."""
        return decode_rows(self.W_dec, top_values, top_indices) + self.b_pre

    def forward(self, x: torch.Tensor) -> SAEOutput:
        """[batch, d] -> SAEOutput (see its field docs for shapes)."""
        pre_acts = self.pre_activations(x)
        top_values, top_indices = pre_acts.topk(self.k, dim=1, sorted=True)
        latents = torch.zeros_like(pre_acts).scatter_(1, top_indices, top_values)
        recon = self.decode(top_values, top_indices)
        return SAEOutput(recon, latents, top_values, top_indices, pre_acts)

    def decoder_directions(self) -> torch.Tensor:
        """Unit-norm feature directions [n_latents, d] (row i = feature i), detached from the graph."""
        rows = self.W_dec.detach()
        return rows / rows.norm(dim=1, keepdim=True).clamp_min(torch.finfo(rows.dtype).tiny)

    @torch.no_grad()
    def normalize_decoder(self) -> None:
        """Rescale every decoder row to unit norm (in place)."""
        self.W_dec.div_(self.W_dec.norm(dim=1, keepdim=True).clamp_min(torch.finfo(self.W_dec.dtype).tiny))

    @torch.no_grad()
    def project_decoder_grad(self) -> None:
        """Remove from W_dec.grad the component parallel to each (unit-norm) decoder row.

        With unit-norm rows, that component would only change a row's length, which `normalize_decoder` undoes
        after the optimiser step; removing it keeps Adam's moment estimates for the directions that matter.
        """
        if self.W_dec.grad is None:
            return
        rows = self.W_dec.detach()
        parallel = (self.W_dec.grad * rows).sum(dim=1, keepdim=True)
        self.W_dec.grad.addcmul_(parallel, rows, value=-1)


def decode_rows(rows: torch.Tensor, values: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Weighted sum of selected rows: rows [n_latents, d], values/indices [batch, j] -> [batch, d]. In the rows' dtype:
    under bf16 autocast the values arrive in bf16 and the (cheap) sparse sum stays in full precision."""
    return F.embedding_bag(indices, rows, per_sample_weights=values.to(rows.dtype), mode="sum")
