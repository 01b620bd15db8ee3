"""Day two under traffic in one replay (docs/day-two.md): the control-plane twin with the
real LWS controller, a process kubelet on the stack's simulated GPU nodes, and the data-plane
twin's pickers and gateway stand-in, for rollouts and faults under steady agent traffic."""
