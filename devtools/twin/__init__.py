"""The control-plane twin: etcd, kube-apiserver, scheduler, controller-manager and kwok built from
Go modules and run on loopback, with fake H100 nodes copied from a stack (docs/twin.md)."""
