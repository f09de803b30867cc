//! The networks and what trains them: the MLP (with PyTorch's init and an
//! optional TorchScript trace), AdamW, the gradient scaler and the two
//! losses, and the CFR `Policy` that queries the networks.

pub mod forward_graphs;
pub mod graph;
pub mod network;
pub mod optim;
pub mod policy;
