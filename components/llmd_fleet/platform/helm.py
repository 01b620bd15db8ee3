"""Helm releases pinned to the version matrix."""

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from llmd_fleet.versions import Chart


def pinned_release(
    logical_name: str,
    release_name: str,
    chart: Chart,
    namespace: str,
    values: dict[str, Any],
    opts: pulumi.ResourceOptions,
) -> k8s.helm.v3.Release:
    """A Helm release of a chart at exactly the matrix's version (OCI reference or HTTP repo)."""
    return k8s.helm.v3.Release(
        logical_name,
        name=release_name,
        chart=chart.chart,
        version=chart.version,
        repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repository) if chart.repository else None,
        namespace=namespace,
        values=values,
        opts=opts,
    )
