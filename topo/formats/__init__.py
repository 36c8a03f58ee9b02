"""Readers of other tools' text output and of rank-map inputs."""
