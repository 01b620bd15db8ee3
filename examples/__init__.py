"""Example programs that import llmd-fleet's components into a program of their own."""
