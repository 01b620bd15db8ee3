# Entry points used by the README and CI. Every target runs inside the locked uv environment.
UV ?= uv
# `llmd-fleet check` always reads the project's own schemas/crds, which vendors every CRD the stacks
# need, so `make check` needs nothing outside the repository. Set CRD_DIR to cross-check against
# another CRD directory as well (`make check CRD_DIR=dir` adds `--crd-dir dir`); a CRD it defines
# differently from schemas/crds is an error.
CRD_DIR ?=
STACKS := $(patsubst stacks/Pulumi.%.yaml,%,$(wildcard stacks/Pulumi.*.yaml))

.PHONY: setup check render plan test lint hadolint typecheck unit

# --compile-bytecode: where PYTHONDONTWRITEBYTECODE is set (CI machines set it), Python would
# otherwise compile the generated SDKs (thousands of modules) from source in every process.
# A download that fails (a truncated wheel, a hash mismatch) is cleaned from uv's cache and run
# once more (devtools/download_retry.py, standard library only: there is no venv yet).
setup: ## Install uv if missing, then the locked environment (.venv), bytecode included
	@command -v $(UV) >/dev/null 2>&1 || python3 devtools/download_retry.py pip -- python3 -m pip install --quiet uv
	python3 devtools/download_retry.py uv -- $(UV) sync --frozen --compile-bytecode

check: ## Render every stack offline and validate all manifests (built-in kinds and CRDs)
	@set -e; for s in $(STACKS); do $(UV) run --frozen llmd-fleet check $$s $(if $(CRD_DIR),--crd-dir $(CRD_DIR)); done

render: ## Render every stack into build/<stack>/
	@set -e; for s in $(STACKS); do $(UV) run --frozen llmd-fleet render $$s; done

plan: ## Print the plan of every stack
	@set -e; for s in $(STACKS); do $(UV) run --frozen llmd-fleet plan $$s; done

test: lint hadolint typecheck unit ## Lint (code and Dockerfiles), type-check and run the test suite

lint:
	$(UV) run --frozen ruff check .
	$(UV) run --frozen ruff format --check .

hadolint: ## Lint every Dockerfile under images/ (hadolint from the locked environment)
	$(UV) run --frozen hadolint images/*Dockerfile*

typecheck:
	$(UV) run --frozen mypy

# Two workers on the 2-core machines (one per core), each test file whole in one worker so its
# module fixtures (synthesized stacks) are built once: about half the wall time of one process.
unit:
	$(UV) run --frozen pytest -n auto --dist loadfile

.PHONY: prebuild
prebuild: ## Build every cached tool (Python environments and Go tools, two lanes) ahead of the steps that need them; prints each cold build's time
	$(UV) run --frozen python -m devtools.prebuild

.PHONY: test-wheel
test-wheel: ## Build the wheel, install it into a clean virtualenv outside the repo and use it from there (slow)
	$(UV) run --frozen pytest -m slow tests/test_wheel.py

.PHONY: docs golden
docs: ## Regenerate docs/configuration.md from the config models, docs/quickstart.md's prerequisites from the version matrix and chart values, and the facade's type-checker imports from the registry
	$(UV) run --frozen python -m devtools.config_reference
	$(UV) run --frozen python -m devtools.quickstart_prerequisites
	$(UV) run --frozen python -m devtools.facade_imports

golden: ## Refresh the golden rendered output of every stack under tests/golden/ (review the diff)
	$(UV) run --frozen python -m devtools.golden

# The best of 2 timed runs after an untimed warm-up (3 until the CI time ledger of docs/twin.md):
# each run costs every stack a render and a check.
BENCH_CLI_REPEAT ?= 2

.PHONY: bench-cli
bench-cli: ## Time render and check of every stack as ratios to the bare SDK import (docs/performance.md)
	$(UV) run --frozen python -m devtools.bench_cli --repeat $(BENCH_CLI_REPEAT)

.PHONY: check-vllm
check-vllm: ## Check every rendered vLLM command line with the pinned vLLM's own parser (cached env)
	$(UV) run --frozen python -m devtools.vllm_check.env
	@set -e; for s in $(STACKS); do $(UV) run --frozen llmd-fleet render $$s --reuse; done
	$(UV) run --frozen python -m devtools.vllm_check $(STACKS)
	$(UV) run --frozen python -m devtools.metrics_catalogue vllm $(STACKS)

.PHONY: promtool
promtool: ## promtool (pinned, built from the Prometheus module into a cache) checks and unit-tests every stack's alert rules; metric names against the catalogue
	@set -e; for s in $(STACKS); do $(UV) run --frozen llmd-fleet render $$s --reuse; done
	$(UV) run --frozen python -m devtools.promtool check $(STACKS)

.PHONY: check-router
check-router: ## The pinned llm-d router's own config loader, 1.0 plugin factories and session-key path on every rendered EPP config (router source: LLMD_ROUTER_SOURCE or ../shared/src; "not run" without one)
	@set -e; for s in $(STACKS); do $(UV) run --frozen llmd-fleet render $$s --reuse; done
	$(UV) run --frozen python -m devtools.router_check $(STACKS)

.PHONY: check-responses
check-responses: ## The rendered agentic API Deployment against the pinned agentic-server (cached env): every flag and variable it knows, its version, a start with the rendered security context and probes (needs root; docs/responses.md)
	@set -e; for s in $(STACKS); do $(UV) run --frozen llmd-fleet render $$s --reuse; done
	$(UV) run --frozen python -m devtools.agentic_check $(STACKS)

.PHONY: bench-workload
bench-workload: ## Validate every stack's benchmark workload with the pinned inference-perf's own config models (cached env, its own Python)
	$(UV) run --frozen python -m devtools.bench.env $(STACKS)

.PHONY: preflight-probe
preflight-probe: ## The fabric preflight probe over the pinned NIXL (UCX, host memory, two local agents; cached env)
	$(UV) run --frozen python -m devtools.preflight_probe.env
	$(UV) run --frozen pytest -m nixl tests/devtools/test_preflight_probe.py

.PHONY: checkov
checkov: ## checkov over every rendered stack, serving pod templates included (pinned, cached env)
	$(UV) run --frozen python -m devtools.checkov_scan.env
	@set -e; for s in $(STACKS); do $(UV) run --frozen llmd-fleet render $$s --reuse; done
	$(UV) run --frozen python -m devtools.checkov_scan $(STACKS)

# Every GKE and EKS stack (found from the stack files' target kind) unless STACK names one.
STACK ?=

.PHONY: check-cloud
check-cloud: ## Every rendered GKE/EKS cloud input against botocore's and Google's own API models (pinned, cached env); STACK=<name> for one stack
	@$(UV) run --frozen python -m devtools.cloud_check $(STACK)

.PHONY: check-versions
check-versions: ## Every version images/versions.toml pins checked to exist (uv, go list -m; the serving image's wheel set resolved); the rest listed with where it comes from
	@$(UV) run --frozen python -m devtools.version_check

# The control-plane twin (docs/twin.md): etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager and kwok built from Go modules into a cache outside the repository, run on
# loopback with TWIN_STACK's nodes simulated; the Pulumi CLI and Kubernetes provider of the engine
# run likewise, and the Python language host from its source snapshot (../shared/src). Needs Go
# and the Go module proxy on a cold cache.
TWIN_STACK ?= onprem-h100

.PHONY: twin twin-build twin-up twin-down twin-status e2e engine quickstart-twin
twin: twin-up ## Try the whole fleet without a cloud: start the twin with TWIN_STACK's fake nodes

twin-build: ## Build (or reuse) the twin's binaries; each cold build prints its duration
	$(UV) run --frozen python -m devtools.twin build

twin-up: ## Start the twin (API server, scheduler, controller manager, kwok, fake nodes) on loopback
	$(UV) run --frozen python -m devtools.twin up $(TWIN_STACK)

twin-down: ## Stop the twin and delete its etcd data
	$(UV) run --frozen python -m devtools.twin down

twin-status: ## What the twin runs, API server readiness, nodes Ready, ResourceSlices
	$(UV) run --frozen python -m devtools.twin status

# E2E_ARGS=--without-day-two-checks (CI) leaves the decode rollout, the node loss with a spare node
# and the External scaling to `make day-two`, which runs them under traffic (the scaling by the HPA
# controller) and prints their lines (docs/day-two.md).
E2E_ARGS ?=

e2e: ## Put TWIN_STACK into a fresh twin and assert by reading the API server; prints the figures
	$(UV) run --frozen python -m devtools.twin e2e $(TWIN_STACK) $(E2E_ARGS)

engine: ## With the twin up (make twin): TWIN_STACK and the policy pack through the Pulumi CLI and the real Python language host (type error refused, preview, up, second up, update, destroy)
	$(UV) run --frozen python -m devtools.twin engine $(TWIN_STACK)

# QUICKSTART_ARGS=--keep-twin leaves the twin up after a pass, for `make doctor-twin
# DOCTOR_TWIN_ARGS=--shared` (CI: one twin for both).
QUICKSTART_ARGS ?=
DOCTOR_TWIN_ARGS ?=

quickstart-twin: ## Walk docs/quickstart.md's commands (real Pulumi CLI, file backend) against a fresh twin; prints each step and its time
	@start=$$(date +%s); $(UV) run --frozen python -m devtools.twin quickstart $(QUICKSTART_ARGS); \
	status=$$?; echo "quickstart-twin: $$(( $$(date +%s) - start )) s"; exit $$status

# COMPONENTS_ARGS=--shared uses the twin `make quickstart-twin QUICKSTART_ARGS=--keep-twin` kept and
# leaves it for `make doctor-twin DOCTOR_TWIN_ARGS=--shared` (CI: one twin for the three).
COMPONENTS_ARGS ?=

.PHONY: components
components: ## The Fleet component (provider/) from a YAML and a TypeScript program: quickstart-h100 into the twin, second up, destroy (docs/components.md)
	@start=$$(date +%s); $(UV) run --frozen python -m devtools.twin components $(COMPONENTS_ARGS); \
	status=$$?; echo "components: $$(( $$(date +%s) - start )) s"; exit $$status

.PHONY: doctor-twin
doctor-twin: ## llmd-fleet doctor on the quickstart's twin prepared as a real install leaves it (0 failed), then broken (exactly 3 failed), then status's scheduler messages; --shared reuses the quickstart walk's twin
	@start=$$(date +%s); $(UV) run --frozen python -m devtools.twin doctor $(DOCTOR_TWIN_ARGS); \
	status=$$?; echo "doctor-twin: $$(( $$(date +%s) - start )) s"; exit $$status

# Day two under traffic (docs/day-two.md): the twin with the real LWS controller and a process
# kubelet on the stack's serving nodes (simulators in per-pod network namespaces), the rendered
# pickers behind the gateway stand-in, steady agent traffic, and a rolling upgrade with the rollout
# screener on, then off (the negative control), each revision by `pulumi up` (the Pulumi CLI, the
# Python language host and the Kubernetes provider of `make e2e`'s engine run); then, under one
# traffic stream, the leader picker stopped, a decode node lost and a decode node drained (GPU
# loss); e2e's `controller:`, `rollout:`, `node loss:` and `scale:` lines from the same runs;
# last, the Responses phase on its deployment and the multi-model reference in a namespace of its
# own on its twin (the `responses`, `models:` and `lora:` lines). Needs root and the LWS, router
# and simulator source snapshots ("not run" without them).
DAYTWO_STACK ?= day-two
# DAYTWO_ARGS=--apply-manifests applies each revision's rendered objects instead of `pulumi up`.
# DAYTWO_ARGS=--only=routing,models runs the deployment and its `controller:` line, then only the named phases (routing, faults, responses, models; docs/day-two.md).
DAYTWO_ARGS ?=

.PHONY: day-two
day-two: ## Rolling upgrade under steady agent traffic on the twin (real LWS controller, process kubelet, real pickers); screener-off negative control; failover, node and GPU loss
	@start=$$(date +%s); $(UV) run --frozen python -m devtools.daytwo $(DAYTWO_STACK) $(DAYTWO_ARGS); \
	status=$$?; echo "day-two: $$(( $$(date +%s) - start )) s"; exit $$status

# The data-plane twin (docs/twin.md): the twin's API server, the rendered router objects, the
# simulators and routing sidecars in per-pod network namespaces, two picker replicas with the
# rendered flags and config, and a replay through the gateway stand-in. Needs root (namespaces)
# and the router and simulator source snapshots ("not run" without them).
DATAPLANE_STACK ?= local-sim

.PHONY: dataplane dataplane-long dataplane-broken dataplane-precise dataplane-reference
dataplane: ## Short replay through the rendered router (rendered vs baseline scorers); prints the figures and its time
	@start=$$(date +%s); $(UV) run --frozen python -m devtools.dataplane run $(DATAPLANE_STACK); \
	status=$$?; echo "dataplane: $$(( $$(date +%s) - start )) s"; exit $$status

dataplane-long: ## The long replay (more sessions, turns and overload)
	$(UV) run --frozen python -m devtools.dataplane run $(DATAPLANE_STACK) --long

DATAPLANE_PRECISE_STACK ?= quickstart-h100

dataplane-precise: ## Precise (KV-event) prefix routing: one simulator per rank, KV events relayed to the pickers (not in CI)
	@start=$$(date +%s); $(UV) run --frozen python -m devtools.dataplane run $(DATAPLANE_PRECISE_STACK) --kv-events; \
	status=$$?; echo "dataplane-precise: $$(( $$(date +%s) - start )) s"; exit $$status

# The reference topology scaled down: one instance per role of onprem-h100 (same roles, plugins and
# thresholds), with DATAPLANE_REFERENCE_RANKS ranks per pod instead of 8 on this 2-core machine.
DATAPLANE_REFERENCE_STACK ?= onprem-h100
DATAPLANE_REFERENCE_RANKS ?= 2

# ...and, in the same step, the multi-model reference scaled the same way (one instance per role per
# model): routing by model through the body-based router, the `models:` and `lora:` lines and the
# negative control (docs/multi-model.md). Empty, or the same as the stack above, runs it once.
DATAPLANE_MODELS_STACK ?= onprem-h100-multimodel
# DATAPLANE_REFERENCE_ARGS=--without-responses (CI) leaves the reference run's Responses phase to
# `make day-two`, which runs it on the replay's own deployment, and the multi-model run with it
# (CI also sets DATAPLANE_MODELS_STACK empty; docs/day-two.md).
DATAPLANE_REFERENCE_ARGS ?=

dataplane-reference: ## Scaled-down reference stack with precise prefix routing and KV events, then the multi-model reference (in CI)
	@start=$$(date +%s); $(UV) run --frozen python -m devtools.dataplane run $(DATAPLANE_REFERENCE_STACK) \
	  --scaled --ranks-per-pod=$(DATAPLANE_REFERENCE_RANKS) --kv-events $(DATAPLANE_REFERENCE_ARGS); \
	status=$$?; echo "dataplane-reference: $(DATAPLANE_REFERENCE_STACK): $$(( $$(date +%s) - start )) s"; \
	if [ -n "$(DATAPLANE_MODELS_STACK)" ] && [ "$(DATAPLANE_MODELS_STACK)" != "$(DATAPLANE_REFERENCE_STACK)" ]; then \
	  models_start=$$(date +%s); $(UV) run --frozen python -m devtools.dataplane run $(DATAPLANE_MODELS_STACK) \
	    --scaled --ranks-per-pod=$(DATAPLANE_REFERENCE_RANKS); models_status=$$?; \
	  echo "dataplane-reference: $(DATAPLANE_MODELS_STACK): $$(( $$(date +%s) - models_start )) s"; \
	  if [ $$status -eq 0 ]; then status=$$models_status; fi; fi; \
	echo "dataplane-reference: $$(( $$(date +%s) - start )) s"; exit $$status

# The reason the broken run must fail with: without tokens from the render service the picker has no
# prefix match information, so nothing but chance sends a new session's first turn (or a sub-agent)
# to an endpoint that holds its program's prefix, and the new sessions' hit rate is no better than
# the baseline's (docs/twin.md). The P/D decider disaggregating nothing is printed too.
DATAPLANE_BROKEN_REASON := the rendered config does not beat the baseline on the new sessions' hit rate
# Without tokens the P/D decider also disaggregates nothing, every run. Both sides of the new
# sessions' comparison are then chance placement (the broken config lower in every run so far, by
# 2 to 17 points), so a run in which chance favours the broken config still fails, on P/D only; the
# step accepts that and says so, and any other failure is not the broken config's.
DATAPLANE_BROKEN_ALSO := the P/D decider did not disaggregate

dataplane-broken: ## Negative control (steady replay only): the token producer's render URL on a wrong port; passes only if the run fails for that reason
	@start=$$(date +%s); out=$$($(UV) run --frozen python -m devtools.dataplane run $(DATAPLANE_STACK) --broken 2>&1); \
	status=$$?; echo "$$out" | grep -v '^twin'; echo "dataplane-broken: $$(( $$(date +%s) - start )) s"; \
	if echo "$$out" | grep -q '^dataplane: not run:'; then echo "dataplane-broken: not run (no source snapshot)"; exit 0; fi; \
	if [ $$status -eq 0 ]; then echo "dataplane-broken: the broken config passed" >&2; exit 1; fi; \
	if echo "$$out" | grep -q "FAIL: $(DATAPLANE_BROKEN_REASON)"; then \
	  echo "dataplane-broken: failed as it must ($(DATAPLANE_BROKEN_REASON))"; exit 0; fi; \
	if echo "$$out" | grep -q "FAIL: $(DATAPLANE_BROKEN_ALSO)"; then \
	  echo "dataplane-broken: failed as it must ($(DATAPLANE_BROKEN_ALSO); the new sessions' hit rate did not fall below the baseline's in this run)"; exit 0; fi; \
	echo "dataplane-broken: failed, but not for the expected reason ($(DATAPLANE_BROKEN_REASON))" >&2; exit 1
