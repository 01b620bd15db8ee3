"""The autoscaling layer: KEDA and the roles' ScaledObjects (`serving.autoscaling`)."""
