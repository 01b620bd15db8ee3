"""The llmd-fleet Pulumi program and the offline synthesis command line."""
