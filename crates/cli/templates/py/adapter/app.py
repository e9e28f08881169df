"""`{{id}}`: a gatehouse adapter, in Python. One capability, `greet` (see manifest.toml):
`{"name"}` in, a greeting as a text block and `{"greeting"}` as the structured result out."""

from gatehouse_sdk import Adapter, json_result


class WitWorld(Adapter):
    # Each method is a capability id manifest.toml declares.
    def greet(self, args, ctx):
        return json_result({"greeting": f"Hello, {args['name']}!"})
