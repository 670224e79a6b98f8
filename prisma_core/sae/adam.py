"""Adam for the SAE through the fused kernel that `torch.optim.Adam(fused=True)` runs, without `torch.optim`.

An optimizer of `torch.optim` imports `torch._dynamo` at its first step (torch's own graph-break guard): 78 MB more
resident memory and 1.5 to 2.8 s on two cores, on every training, for a compiler Prisma never uses. The same kernel
called directly gives the same weights to the bit (tests/core/test_sae.py) and keeps that import out of the process.
"""

from collections.abc import Iterable

import torch
from torch import nn


class FusedAdam:
    def __init__(
        self,
        parameters: Iterable[nn.Parameter],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.parameters = list(parameters)
        self.lr, self.betas, self.eps = lr, betas, eps
        self.exp_avgs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.parameters]
        self.exp_avg_sqs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.parameters]
        self.steps = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.parameters]

    def zero_grad(self) -> None:
        for parameter in self.parameters:
            parameter.grad = None

    @torch.no_grad()
    def step(self) -> None:
        with_grad = [i for i, p in enumerate(self.parameters) if p.grad is not None]
        if not with_grad:
            return
        steps = [self.steps[i] for i in with_grad]
        torch._foreach_add_(steps, 1)
        torch._fused_adam_(
            [self.parameters[i] for i in with_grad],
            [self.parameters[i].grad for i in with_grad],
            [self.exp_avgs[i] for i in with_grad],
            [self.exp_avg_sqs[i] for i in with_grad],
            [],
            steps,
            amsgrad=False,
            lr=self.lr,
            beta1=self.betas[0],
            beta2=self.betas[1],
            weight_decay=0.0,
            eps=self.eps,
            maximize=False,
            grad_scale=None,
            found_inf=None,
        )
