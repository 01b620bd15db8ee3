"""Build every cached tool the checks and twins use, ahead of the steps that need them.

    python -m devtools.prebuild [--list]

CI (`.ci/run`) starts this in the background, at a low priority, right after `make setup`: the
Python steps that come first (render, check, the test suite) leave a core idle most of the time,
and the tool builds (downloads most of all) fill it. Two lanes run side by side:

- the Python tool environments (vLLM's parser, checkov, the cloud API models, inference-perf,
  the NIXL probe, the agentic API): pip downloads, mostly waiting on the network; then the engine
  run's Pulumi CLI, Python language host and Kubernetes provider (`make e2e` needs them with the
  twin's binaries, which the other lane builds meanwhile; the host right after the CLI: it needs
  the same sdk/v3 and pkg/v3 packages);
- the other Go tools, one at a time, in the order the checks need them (promtool, the router
  checker, the control-plane twin's binaries, the LWS controller, the YAML and Node.js language
  hosts of `make components`, the data plane's router and simulator, the day-two replay's
  Prometheus and external-metrics stand-in).

All Go builds share one module cache and one build cache, so a package two of them need at one
version compiles once.

Every build goes through the tool cache's file lock (devtools/tool_cache.py): a step that needs a
tool this process is building waits for it instead of building it twice, and one that needs a tool
not reached yet builds it itself. Each cold build prints its time, as it does when a step builds it;
a tool that is already built prints nothing; a build that fails is reported here and left to the
step that needs it (which fails with the build's error). A tool whose source snapshot is missing
(../shared/src) is skipped with the step's own "not run" reason.
"""

import sys
import threading
import time
from collections.abc import Callable, Sequence

Build = tuple[str, Callable[[], object]]


def _twin(name: str) -> Callable[[], object]:
    def build() -> object:
        from devtools.twin.build import ensure
        from devtools.twin.modules import wrappers

        return ensure(wrappers()[name])

    return build


def _lws() -> object:
    from devtools.twin import lws

    built = lws.ensure()
    if built.seconds is not None:  # its command line prints this line; ensure() does not
        print(f"LWS controller manager built in {built.seconds:.0f} s", file=sys.stderr, flush=True)
    return built


def _python_host() -> object:
    from devtools.twin import python_host

    return python_host.ensure()  # prints its cold build's time itself


def _nodejs_host() -> object:
    from devtools.twin import nodejs_host

    return nodejs_host.ensure()  # prints its cold build's time itself


def _dataplane(which: str) -> Callable[[], object]:
    def build() -> object:
        from devtools.dataplane import build as dataplane

        if which == "bbr":
            return dataplane.ensure_bbr()
        return dataplane.ensure(dataplane.ROUTER if which == "router" else dataplane.SIMULATOR)

    return build


def _prometheus() -> object:
    from devtools.daytwo import prometheus

    return prometheus.ensure()  # prints its cold build's time itself


def _operator_config() -> object:
    from devtools.daytwo import operator_config

    return operator_config.ensure()  # prints its cold build's time itself


def _metrics_adapter() -> object:
    from devtools.daytwo import scaling

    return scaling.ensure()  # prints its cold build's time itself


def _python_envs() -> list[Build]:
    from devtools.agentic_check import env as agentic
    from devtools.bench import env as bench
    from devtools.checkov_scan import env as checkov
    from devtools.cloud_check import env as cloud_models
    from devtools.preflight_probe import env as preflight
    from devtools.vllm_check import env as vllm

    return [
        ("vLLM parser environment", vllm.ensure),
        ("checkov environment", checkov.ensure),
        ("cloud API models environment", cloud_models.ensure),
        ("inference-perf environment", bench.ensure),
        ("NIXL probe environment", preflight.ensure),
        ("agentic API environment", agentic.ensure),
    ]


def _go_tools() -> list[Build]:
    from devtools.promtool import build as promtool
    from devtools.router_check import build as router_check

    return [
        ("promtool", promtool.ensure),
        ("router checker", router_check.ensure),
        ("twin etcd", _twin("etcd")),
        ("twin kubernetes", _twin("kubernetes")),
        ("twin kwok", _twin("kwok")),
        ("LWS controller", _lws),
        # `make components` (docs/components.md): the YAML and Node.js language hosts.
        ("twin pulumi-yaml", _twin("pulumi-yaml")),
        ("Node.js language host", _nodejs_host),
        ("data-plane router", _dataplane("router")),
        ("simulator", _dataplane("simulator")),
        # `make dataplane-reference`'s multi-model run (docs/multi-model.md).
        ("body-based router", _dataplane("bbr")),
        # `make day-two`'s Prometheus (devtools/daytwo/prometheus.py), last: the day-two step is
        # CI's last (it waits here on the tool cache's lock if this build is still running), and
        # the promtool module's packages are compiled by then, so most of it is cached.
        ("Prometheus", _prometheus),
        # Its scrape configuration's generator (devtools/daytwo/operator_config.py), needed as
        # the replay starts (the step waits on its lock as on Prometheus'): mostly its own build,
        # its Prometheus and Kubernetes modules being other versions than promtool's and the twin's.
        ("prometheus-operator's config generator", _operator_config),
        # `make day-two`'s external-metrics stand-in (devtools/daytwo/scaling.py), after the
        # twin's Kubernetes: most of the k8s.io packages it compiles are of a newer minor, so it
        # is mostly its own build.
        ("external-metrics stand-in", _metrics_adapter),
    ]


def _engine_tools() -> list[Build]:
    """The engine run's Pulumi CLI, Python language host (right after the CLI: it compiles against
    the same pkg/v3 and sdk/v3 packages) and Kubernetes provider."""
    return [
        ("Pulumi CLI", _twin("pulumi")),
        ("Python language host", _python_host),
        ("Kubernetes provider", _twin("kubernetes-provider")),
    ]


def lanes() -> list[list[Build]]:
    """The Python environments, then the engine run's Go tools (the Go lane has the control-plane
    twin's binaries to build first). Measured cold on 2 cores (docs/twin.md#ci-time-ledger): with
    the engine tools in the Go lane, `make e2e` started 17 min in and built the CLI and the
    provider itself (13 of its 17.7 min); with them here, it started 14 min in, before this lane
    had finished the environments, and built them itself again (17 of its 21.7 min, the provider
    slower beside both lanes). Every lane and step is CPU-bound then, so the order moves little:
    what e2e waits for is the Go work it needs (about 26 CPU-minutes cold)."""
    return [[*_python_envs(), *_engine_tools()], _go_tools()]


def _not_run(error: BaseException) -> bool:
    """A missing source snapshot: the step that needs the tool says "not run" itself."""
    return type(error).__name__ in ("SourceMissing", "SnapshotMissing")


def run_lane(builds: Sequence[Build], failures: list[str]) -> None:
    for name, build in builds:
        started = time.monotonic()
        try:
            build()
        except Exception as error:  # reported, and left to the step that needs the tool
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            if _not_run(error):
                print(f"prebuild: {name}: not run: {first}", file=sys.stderr, flush=True)
            else:
                failures.append(name)
                elapsed = time.monotonic() - started
                print(f"prebuild: {name}: failed after {elapsed:.0f} s: {first}", file=sys.stderr, flush=True)


def main(argv: Sequence[str]) -> int:
    if list(argv) == ["--list"]:
        for lane in lanes():
            print(", ".join(name for name, _ in lane))
        return 0
    if argv:
        print("usage: python -m devtools.prebuild [--list]", file=sys.stderr)
        return 2
    started = time.monotonic()
    failures: list[str] = []
    threads = [threading.Thread(target=run_lane, args=(lane, failures)) for lane in lanes()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    verdict = f"{len(failures)} failed ({', '.join(failures)})" if failures else "0 failed"
    print(f"prebuild: done in {time.monotonic() - started:.0f} s, {verdict}", file=sys.stderr, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
