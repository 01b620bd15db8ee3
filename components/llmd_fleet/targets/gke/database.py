"""GKE: the response store on Cloud SQL for PostgreSQL, and the managed gateway's reserved address.

`GkeResponses` (`llmd-fleet:responses:GkeResponses`) declares, in the fleet's VPC:

- Private Service Access: a global internal address range with purpose VPC_PEERING (the configured
  `privateServiceCidr`) and the service networking connection that peers it with Google's
  service producer network, which is where Cloud SQL's private IP comes from;
- a regional (HA: a standby in another zone, automatic failover) Cloud SQL for PostgreSQL
  instance with no public IP, TLS required, automated daily backups and point-in-time recovery,
  deletion protection in the API and in Pulumi (`protect`), backups kept after a deletion;
- its database and the owner role, whose password is the secret config `responsesDbPassword`;
- with GKE's managed gateway: a regional internal address in the node subnet that the Gateway
  takes by name (`spec.addresses` NamedAddress), so the agentic API can call the gateway back.

Every input comes from `target.gke` and `responses`: a serving change replaces nothing here.
The cloud SDK's `sql` and `servicenetworking` modules load only on this code path.
"""

import ipaddress
from typing import TYPE_CHECKING, TypedDict

import pulumi
import pulumi_gcp as gcp

from llmd_fleet.targets.base import store_settings
from llmd_fleet.targets.declared import ManagedDatabase, ReservedGatewayAddress
from llmd_fleet.targets.gke.config import (
    MANAGED_GATEWAY,
    GkeTargetConfig,
    ResponsesGkeDatabaseConfig,
    gateway_address,
)
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.layers.responses.config import ResponsesConfig

SERVICE_NETWORKING = "servicenetworking.googleapis.com"
BACKUP_START = "03:00"
"""UTC start of the daily backup window (a four-hour window)."""
MAX_LOG_RETENTION_DAYS = 7
"""Transaction-log days Cloud SQL keeps for point-in-time recovery on both editions (ENTERPRISE
allows at most 7)."""


def log_retention_days(backup_retention_days: int) -> int:
    """Days of transaction logs: fewer than the backups kept, at most 7."""
    return max(1, min(MAX_LOG_RETENTION_DAYS, backup_retention_days - 1))


def gateway_address_name(gke: GkeTargetConfig) -> str:
    """The GCE name of the managed gateway's reserved address."""
    return f"{gke.name}-gateway"


def gateway_addresses(address_name: str) -> list[dict[str, str]]:
    """The Gateway's `spec.addresses` on GKE: the regional internal address the stack reserves
    (GKE Gateway: `NamedAddress`, a reserved address by name)."""
    return [{"type": "NamedAddress", "value": address_name}]


class GkeResponsesArgs(TypedDict):
    """Arguments of `GkeResponses`. Every key is required."""

    gke: GkeTargetConfig
    """The `target.gke` section (project, region, name)."""
    responses: "ResponsesConfig"
    """The `responses` section (the database's settings)."""
    gateway_implementation: str
    """`gateway.implementation`; the gateway's internal address is reserved only for a managed one."""
    network: pulumi.Input[str]
    """The fleet's primary VPC (id), peered for Private Service Access."""
    subnet: pulumi.Input[str]
    """The node subnet (id) the gateway's address is reserved in."""
    password: pulumi.Input[str]
    """The owner role's password, wrapped as a secret."""


class GkeResponses(pulumi.ComponentResource):
    """Private Service Access, a regional Cloud SQL for PostgreSQL instance, its database and
    owner, and the managed gateway's internal address."""

    instance: gcp.sql.DatabaseInstance
    database: ManagedDatabase

    def __init__(self, name: str, args: GkeResponsesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:responses:GkeResponses", name, {}, opts)
        gke, responses = args["gke"], args["responses"]
        settings = store_settings(responses.database, "gke", ResponsesGkeDatabaseConfig)
        store = responses.database
        child = pulumi.ResourceOptions(parent=self)
        psa = ipaddress.IPv4Network(settings.private_service_cidr)
        peering_range = gcp.compute.GlobalAddress(
            f"{name}-psa-range",
            name=f"{gke.name}-psa",
            project=gke.project,
            network=args["network"],
            purpose="VPC_PEERING",
            address_type="INTERNAL",
            address=str(psa.network_address),
            prefix_length=psa.prefixlen,
            opts=child,
        )
        connection = gcp.servicenetworking.Connection(
            f"{name}-psa",
            network=args["network"],
            service=SERVICE_NETWORKING,
            reserved_peering_ranges=[peering_range.name],
            opts=child,
        )
        self.instance = gcp.sql.DatabaseInstance(
            f"{name}-instance",
            name=f"{gke.name}-responses",
            project=gke.project,
            region=gke.region,
            database_version=f"POSTGRES_{versions().software['postgresql-major']}",
            deletion_protection=True,
            settings=gcp.sql.DatabaseInstanceSettingsArgs(
                tier=settings.tier,
                edition=settings.edition,
                # HA: a standby in a second zone of the region, failover by Cloud SQL.
                availability_type="REGIONAL",
                disk_type="PD_SSD",
                disk_size=store.storage_gib,
                disk_autoresize=True,
                disk_autoresize_limit=store.max_storage_gib,
                deletion_protection_enabled=True,
                retain_backups_on_delete=True,
                backup_configuration=gcp.sql.DatabaseInstanceSettingsBackupConfigurationArgs(
                    enabled=True,
                    start_time=BACKUP_START,
                    point_in_time_recovery_enabled=True,
                    transaction_log_retention_days=log_retention_days(store.backup_retention_days),
                    backup_retention_settings=gcp.sql.DatabaseInstanceSettingsBackupConfigurationBackupRetentionSettingsArgs(
                        retained_backups=store.backup_retention_days, retention_unit="COUNT"
                    ),
                ),
                ip_configuration=gcp.sql.DatabaseInstanceSettingsIpConfigurationArgs(
                    ipv4_enabled=False,
                    private_network=args["network"],
                    ssl_mode="ENCRYPTED_ONLY",
                ),
                maintenance_window=gcp.sql.DatabaseInstanceSettingsMaintenanceWindowArgs(
                    day=7, hour=4, update_track="stable"
                ),
            ),
            # The response store: a replace would start an empty one.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[connection], protect=True),
        )
        sql_database = gcp.sql.Database(
            f"{name}-database",
            name=store.name,
            project=gke.project,
            instance=self.instance.name,
            opts=child,
        )
        user = gcp.sql.User(
            f"{name}-user",
            name=store.user,
            project=gke.project,
            instance=self.instance.name,
            password=pulumi.Output.secret(args["password"]),
            opts=child,
        )
        reserved: ReservedGatewayAddress | None = None
        if args["gateway_implementation"] == MANAGED_GATEWAY:
            address = gateway_address(settings, gke)
            address_name = gateway_address_name(gke)
            reservation = gcp.compute.Address(
                f"{name}-gateway-address",
                name=address_name,
                project=gke.project,
                region=gke.region,
                subnetwork=args["subnet"],
                address_type="INTERNAL",
                address=address,
                purpose="SHARED_LOADBALANCER_VIP",
                opts=child,
            )
            reserved = ReservedGatewayAddress(
                address=address, gateway_addresses=gateway_addresses(address_name), resource=reservation
            )
        host = self.instance.private_ip_address.apply(lambda ip: ip or "")
        self.database = ManagedDatabase(
            host=host, resources=[self.instance, sql_database, user], gateway_address=reserved
        )
        self.register_outputs({"instance": self.instance.name})
