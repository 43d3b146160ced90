"""One module per agent.  Each exposes `make_<agent>(ctx)`, returning the node function
(state -> partial update) bound to the run's dependencies."""
