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
        return build_command(argv)
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


def build_command(argv: Sequence[str]) -> int:
    """`build|gomod [NAME...]`: build (or regenerate the wrapper module of) the twin's Go tools
    and the language hosts; here, above build.py and the hosts, which both import build.py."""
    from devtools.source_snapshot import SnapshotError
    from devtools.twin import nodejs_host, python_host
    from devtools.twin.build import BuildError, ensure, regenerate
    from devtools.twin.modules import wrappers

    command, names = argv[0], list(argv[1:])
    known = wrappers()
    for name in names or list(known):
        if name not in known and name not in (python_host.NAME, nodejs_host.NAME):
            choices = ", ".join([*known, python_host.NAME, nodejs_host.NAME])
            print(f"twin: unknown module {name!r} (known: {choices})", file=sys.stderr)
            return 2
    try:
        for name in names or [*known, python_host.NAME]:
            if name == nodejs_host.NAME:
                if command == "gomod":
                    print(f"twin gomod: {nodejs_host.regenerate()}")
                else:
                    print(f"{nodejs_host.BINARY}\t{nodejs_host.ensure().binary}")
            elif name == python_host.NAME:
                if command == "gomod":
                    print(f"twin gomod: {python_host.regenerate()}")
                else:
                    try:
                        print(f"{python_host.BINARY}\t{python_host.ensure().binary}")
                    except python_host.SnapshotMissing as missing:
                        if names:  # asked for by name: its source is needed
                            raise
                        print(f"twin build: {python_host.BINARY}: not run: {missing}", file=sys.stderr)
            elif command == "gomod":
                regenerate(name)
                print(f"twin gomod: {known[name].directory}")
            else:
                for binary, path in ensure(wrappers()[name]).items():
                    print(f"{binary}\t{path}")
    except (BuildError, python_host.BuildError, nodejs_host.BuildError, SnapshotError) as error:
        print(f"twin: {error}", file=sys.stderr)
        return 1
    return 0
