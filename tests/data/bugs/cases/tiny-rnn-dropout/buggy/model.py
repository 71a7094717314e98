import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(16, 32, num_layers=1, dropout=0.5)

    def forward(self, x):
        return self.rnn(x)[0]
