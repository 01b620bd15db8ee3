"""Cluster platform (type tokens `llmd-fleet:platform:*`): DRA drivers, LeaderWorkerSet, Helm helpers."""
