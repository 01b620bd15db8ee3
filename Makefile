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
setup: ## Install uv if missing, then the locked environment (.venv), bytecode included
	@command -v $(UV) >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --compile-bytecode

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

unit:
	$(UV) run --frozen pytest

.PHONY: bench-cli
bench-cli: ## Time render and check of every stack as ratios to the bare SDK import (docs/performance.md)
	$(UV) run --frozen python -m infra.bench_cli

.PHONY: check-vllm
check-vllm: ## Check every rendered vLLM command line with the pinned vLLM's own parser (cached env)
	$(UV) run --frozen python -m infra.vllm_check.env
	@set -e; for s in $(STACKS); do $(UV) run --frozen llmd-fleet render $$s; done
	$(UV) run --frozen python -m infra.vllm_check $(STACKS)

.PHONY: checkov
checkov: ## checkov over every rendered stack, serving pod templates included (pinned, cached env)
	$(UV) run --frozen python -m infra.checkov_scan.env
	@set -e; for s in $(STACKS); do $(UV) run --frozen llmd-fleet render $$s; done
	$(UV) run --frozen python -m infra.checkov_scan $(STACKS)
