// `{{id}}`: a gatehouse policy module, in JavaScript. Denies a call whose tool
// (`<adapter id>.<capability id>`) matches one of the `deny` globs of its config (`*` matches
// any run of characters), and allows the rest (see `config_schema` in manifest.toml).
import { allow, deny, policy } from '@gatehouse/sdk';

function matches(glob, name) {
  const pattern = glob.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${pattern.join('.*')}$`).test(name);
}

export const evaluate = policy((action, config) => {
  const tool = `${action.adapterId}.${action.capabilityId}`;
  const glob = (config.deny ?? []).find((g) => matches(g, tool));
  return glob ? deny('TOOL_DENIED', `\`${tool}\` is denied by \`${glob}\``) : allow();
});
