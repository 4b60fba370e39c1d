"""Many nodes: the multi-node preflight behind `doctor --nodes FILE`. Each node's facts are gathered on the
node (`doctor --node-facts`), the controller compares them, pings the NPUs around the ring of the nodes, and
prints the environment each node needs to serve across nodes."""
