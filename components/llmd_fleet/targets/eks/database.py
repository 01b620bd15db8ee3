"""EKS: the response store on RDS for PostgreSQL.

`EksResponses` (`llmd-fleet:responses:EksResponses`) declares, in the fleet's VPC:

- two private /24 subnets of its own (the capacity and the secondary zone; Multi-AZ needs two),
  without a route to the internet, and the DB subnet group over them;
- a security group that admits PostgreSQL (5432) from the cluster's security group only (every
  node carries it, so it is where pods' traffic comes from) and nothing else;
- a Multi-AZ RDS for PostgreSQL instance: storage encrypted (the account's AWS-managed RDS key),
  not publicly accessible, automated backups with point-in-time recovery, deletion protection in
  the API and in Pulumi (`protect`), a final snapshot on deletion; the owner is the master user,
  its password the secret config `responsesDbPassword`.

Every input comes from `target.eks` and `responses`: a serving change replaces nothing here.
The cloud SDK's `rds` module loads only on this code path.
"""

from typing import TYPE_CHECKING, TypedDict

import pulumi
import pulumi_aws as aws

from llmd_fleet.conventions import POSTGRES_PORT
from llmd_fleet.targets.base import store_settings
from llmd_fleet.targets.declared import ManagedDatabase
from llmd_fleet.targets.eks.config import EksTargetConfig, ResponsesEksDatabaseConfig, database_subnet_cidrs
from llmd_fleet.versions import versions

if TYPE_CHECKING:
    from llmd_fleet.layers.responses.config import ResponsesConfig

BACKUP_WINDOW = "03:00-04:00"
"""UTC daily backup window."""
MAINTENANCE_WINDOW = "sun:04:30-sun:05:30"
"""UTC weekly maintenance window (minor version upgrades), after the backup window."""


class EksResponsesArgs(TypedDict):
    """Arguments of `EksResponses`. Every key is required."""

    eks: EksTargetConfig
    """`target.eks`; the VPC range gives the database subnets, the capacity and secondary
    availability zones place them."""
    responses: "ResponsesConfig"
    """The `responses` section; the store's name, owner, storage, retention and `database.eks`
    instance class."""
    cluster_name: str
    """The EKS cluster's name, prefix of every name here."""
    vpc_id: pulumi.Input[str]
    """The fleet's VPC."""
    cluster_security_group_id: pulumi.Output[str | None]
    """The cluster security group EKS puts on every node (llmd_fleet/targets/eks/cluster.py), the
    only source the database admits on 5432; EKS creates it, so an offline render does not know it."""
    password: pulumi.Input[str]
    """The master user's password, wrapped as a secret."""
    tags: dict[str, str]
    """Tags of every resource."""


class EksResponses(pulumi.ComponentResource):
    """Two database subnets, a security group open to the cluster only, and a Multi-AZ RDS for
    PostgreSQL instance."""

    instance: aws.rds.Instance
    security_group: aws.ec2.SecurityGroup
    database: ManagedDatabase

    def __init__(self, name: str, args: EksResponsesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("llmd-fleet:responses:EksResponses", name, {}, opts)
        eks, responses = args["eks"], args["responses"]
        settings = store_settings(responses.database, "eks", ResponsesEksDatabaseConfig)
        store = responses.database
        cluster_name, tags = args["cluster_name"], args["tags"]
        child = pulumi.ResourceOptions(parent=self)
        zones = {
            "database-capacity": eks.availability_zone,
            "database-secondary": eks.secondary_availability_zone,
        }
        subnets = [
            aws.ec2.Subnet(
                f"{name}-{role}",
                vpc_id=args["vpc_id"],
                cidr_block=cidr,
                availability_zone=zones[role],
                tags={**tags, "Name": f"{cluster_name}-{role}-{zones[role]}"},
                opts=child,
            )
            for role, cidr in database_subnet_cidrs(eks.vpc_cidr).items()
        ]
        subnet_group = aws.rds.SubnetGroup(
            f"{name}-subnets",
            name=f"{cluster_name}-responses",
            description="Response store of the agentic API: its own private subnets in two zones",
            subnet_ids=[s.id for s in subnets],
            tags=tags,
            opts=child,
        )
        self.security_group = aws.ec2.SecurityGroup(
            f"{name}-security-group",
            name=f"{cluster_name}-responses-db",
            description="Response store: PostgreSQL from the EKS cluster security group only",
            vpc_id=args["vpc_id"],
            tags={**tags, "Name": f"{cluster_name}-responses-db"},
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-from-cluster",
            security_group_id=self.security_group.id,
            referenced_security_group_id=args["cluster_security_group_id"],
            ip_protocol="tcp",
            from_port=POSTGRES_PORT,
            to_port=POSTGRES_PORT,
            description="PostgreSQL from the cluster's nodes and pods",
            opts=child,
        )
        self.instance = aws.rds.Instance(
            f"{name}-instance",
            identifier=f"{cluster_name}-responses",
            engine="postgres",
            # The major only: RDS picks the newest minor and upgrades it in maintenance windows.
            engine_version=versions().software["postgresql-major"],
            auto_minor_version_upgrade=True,
            allow_major_version_upgrade=False,
            instance_class=settings.instance_class,
            allocated_storage=store.storage_gib,
            max_allocated_storage=store.max_storage_gib,
            storage_type="gp3",
            storage_encrypted=True,
            multi_az=True,
            db_subnet_group_name=subnet_group.name,
            vpc_security_group_ids=[self.security_group.id],
            publicly_accessible=False,
            port=POSTGRES_PORT,
            db_name=store.name,
            username=store.user,
            password=pulumi.Output.secret(args["password"]),
            backup_retention_period=store.backup_retention_days,
            backup_window=BACKUP_WINDOW,
            maintenance_window=MAINTENANCE_WINDOW,
            copy_tags_to_snapshot=True,
            deletion_protection=True,
            skip_final_snapshot=False,
            final_snapshot_identifier=f"{cluster_name}-responses-final",
            tags=tags,
            # The response store: a replace would start an empty one.
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(protect=True)),
        )
        self.database = ManagedDatabase(
            host=self.instance.address.apply(lambda a: a or ""), resources=[self.instance]
        )
        self.register_outputs({"instance": self.instance.identifier})
