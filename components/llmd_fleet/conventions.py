"""Names several areas of the fleet must agree on, defined once.

Base layer: no imports from the project. The config, the plan, the builders and the policy pack
all read these; none of them may define its own copy.
"""

GPU_TAINT_KEY = "nvidia.com/gpu"
"""Taint every GPU node carries (`nvidia.com/gpu:NoSchedule`); GPU pods tolerate it."""
GPU_RESOURCE = "nvidia.com/gpu"
"""The device plugin's extended resource (node groups with `acceleratorAllocation: device-plugin`)."""
DRANET_RDMA_CLASS = "rdma-nic.llmd-fleet.io"
"""The DeviceClass this package creates over DRANET's RDMA NICs (upstream DRANET ships none)."""
DRANET_RDMA_SELECTOR = 'device.driver == "dra.net" && device.attributes["dra.net"].rdma == true'
"""CEL selector of that DeviceClass: the NICs DRANET publishes with RDMA."""
POOL_GROUP = "inference.networking.k8s.io"
"""API group of the InferencePool the gateway routes to and the endpoint picker serves."""
RUNS_BEFORE_ANNOTATION = "llmd-fleet.io/runs-before"
"""On a Job: the workload (`Kind/name`, same namespace) the program creates only after the Job
has completed (the fabric preflight before the DisaggregatedSet). The GPU budget counts such a Job
on its own, not on top of the workload it precedes."""
PREFLIGHT_COMPONENT = "preflight"
"""`app.kubernetes.io/component` of the fabric preflight Job and its pods."""
POSTGRES_PORT = 5432
"""PostgreSQL's port: the response store's, in the cluster (CloudNativePG) or a target's managed
database (Cloud SQL, RDS); the Responses layer's policies and a cloud database's firewall agree
on it."""
