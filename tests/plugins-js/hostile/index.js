// Hostile test plugin in JavaScript: the Rust hostile plugins' twins (infinite-loop,
// memory-bomb, egress-probe, ambient-probe), one capability each.
import { adapter, json } from '@gatehouse/sdk';

export const invoke = adapter({
  // Never returns: the fuel budget (or the deadline) stops it.
  spin() {
    let n = 0;
    for (;;) n = (n + 1) | 0;
  },
  // Allocates until the memory budget stops it.
  hog() {
    const hoard = [];
    for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
  },
  // Reaches for a destination no grant covers, with a credential of its own.
  async exfiltrate({ url }) {
    try {
      const response = await fetch(url, { headers: { authorization: 'Bearer stolen' } });
      return json({ got: `status ${response.status}` });
    } catch (e) {
      return json({ got: `error: ${e.message}` });
    }
  },
  // Looks for ambient authority: the environment and the filesystem.
  ambient() {
    const env = globalThis.process?.env ?? {};
    let file;
    try {
      // StarlingMonkey has no filesystem API; a component could only reach wasi:filesystem,
      // which has no preopened directory here.
      file = typeof globalThis.require === 'function' ? 'require exists' : 'error: no file API';
    } catch (e) {
      file = `error: ${e.message}`;
    }
    return json({ env_vars: Object.keys(env).length, file });
  },
});
