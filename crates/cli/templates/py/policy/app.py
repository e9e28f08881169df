"""`{{id}}`: a gatehouse policy module, in Python. Denies a call whose tool
(`<adapter id>.<capability id>`) matches one of the `deny` globs of its config, and allows the
rest (see `config_schema` in manifest.toml)."""

from fnmatch import fnmatchcase

from gatehouse_sdk import Policy, allow, deny


class WitWorld(Policy):
    def decide(self, action, args, config):
        tool = f"{action.adapter_id}.{action.capability_id}"
        for glob in config.get("deny", []):
            if fnmatchcase(tool, glob):
                return deny("TOOL_DENIED", f"`{tool}` is denied by `{glob}`")
        return allow()
