"""The ExecuTorch partitioner: which convolutions of an edge graph the delegate takes."""
