"""The reference backward (`backward`): pruning (`prune`), the gradient request (`gradients`) and
the invariants every backward program keeps (`invariants`)."""
