import torch
import torch.nn as nn

model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
data = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(4)]

for epoch in range(2):
    for inputs, labels in data:
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
