"""Stack config: the models (the one source of the config's shape, its descriptions and its rules per field), reading a
stack file or Pulumi's runtime config, the rules across keys, and the schemas and TypedDicts generated from the models.

Nothing is imported here: import what you use from its module, so a command that needs no config pays for none.
"""
