"""The template generator: capture the reference, plan template groups, render a ModelNew file per config."""
