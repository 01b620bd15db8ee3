"""The control-plane twin (docs/twin.md).

    python -m devtools.twin up [STACK] [--apiserver-only]   start it and add STACK's fake nodes
    python -m devtools.twin status                          what runs, nodes ready, slices
    python -m devtools.twin down                            stop it, delete its etcd data
    python -m devtools.twin e2e [STACK] [--apiserver-only]  up, assert by reading the API server, down
    python -m devtools.twin engine [STACK]                  the Pulumi engine into the running twin:
                                                            preview, up, second up, update, destroy
    python -m devtools.twin build [NAME ...]                build or reuse the binaries (cache)
    python -m devtools.twin gomod [NAME ...]                regenerate the wrapper Go modules
    python -m devtools.twin lws-build                       build or reuse the LWS controller
    python -m devtools.twin quickstart [--keep|--keep-twin] walk docs/quickstart.md's commands
                                                            against a fresh twin (quickstart-h100)
    python -m devtools.twin doctor [--shared]               llmd-fleet doctor on the quickstart's
                                                            twin, prepared then broken (--shared:
                                                            the twin the walk kept)
    python -m devtools.twin components [--shared] [--only LANGUAGE]
                                                            the Fleet component from YAML and
                                                            TypeScript programs into the twin
                                                            (--shared: the twin the walk kept)
    python -m devtools.twin dataplane STACK [--long] [--broken]
                                                            the data-plane twin: replay through
                                                            STACK's rendered router (root)

STACK defaults to onprem-h100.
"""

import sys
from collections.abc import Sequence


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command = argv[0]
    if command in ("build", "gomod"):
        from devtools.twin.build import main as build_main

        return build_main(argv)
    if command in ("up", "down", "status"):
        from devtools.twin.cluster import main as cluster_main

        return cluster_main(argv)
    if command == "engine":
        from devtools.twin.engine import main as engine_main

        return engine_main(argv[1:])
    if command == "doctor":
        from devtools.twin.doctor import main as doctor_main

        return doctor_main(list(argv[1:]))
    if command == "quickstart":
        from devtools.twin.quickstart import main as quickstart_main

        return quickstart_main(argv[1:])
    if command == "components":
        from devtools.twin.components import main as components_main

        return components_main(argv[1:])
    if command == "lws-build":
        from devtools.twin.lws import main as lws_main

        return lws_main()
    if command == "dataplane":
        from devtools.dataplane.cli import main as dataplane_main

        if len(argv) < 2:
            print(f"twin: dataplane needs a STACK\n{__doc__}", file=sys.stderr)
            return 2
        return dataplane_main(["run", *argv[1:]])
    if command == "e2e":
        from devtools.twin.e2e import main as e2e_main

        return e2e_main(argv[1:])
    print(f"twin: unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2
