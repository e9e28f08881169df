// `{{id}}`: a gatehouse adapter, in JavaScript. One capability, `greet` (see manifest.toml):
// `{ name }` in, a greeting as a text block and `{ greeting }` as the structured result out.
import { adapter, json } from '@gatehouse/sdk';

export const invoke = adapter({
  // Each key is a capability id manifest.toml declares.
  greet({ name }) {
    return json({ greeting: `Hello, ${name}!` });
  },
});
