import time

import torch

model = torch.nn.Linear(4, 1).cuda()
x = torch.randn(8, 4, device="cuda")
start = time.time()
y = model(x)
print(f"forward: {time.time() - start:.6f}s")
