"""The Tensor methods, grouped by kind; baregrad.tensor.Tensor combines them."""
