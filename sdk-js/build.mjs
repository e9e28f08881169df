#!/usr/bin/env node
// Builds a gatehouse adapter or policy component from a JavaScript or TypeScript module:
// 1. bundles the module and what it imports (this SDK as `@gatehouse/sdk` included) into one
//    ES module with esbuild; `gatehouse:*` and `wasi:*` imports stay imports of the component.
//    An adapter's module must export `invoke`; the exports of the contract's other adapter
//    functions it leaves out are supplied (`readResource`: no resources, `getPrompt`: no
//    prompts, `complete`: no suggestions). A policy has no `caller` interface: the SDK's
//    import of it is bound to a module that refuses to be called;
// 2. turns the bundle into a component of the chosen world with componentize-js (the
//    SpiderMonkey engine embedding, 10-40 s on a laptop).
// Then embed a manifest and sign it: `gatehouse pack OUT --manifest manifest.toml --key KEY`.

import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const sdk = dirname(fileURLToPath(import.meta.url));
const usage = `usage: gatehouse-js-build SOURCE --world adapter|policy --out FILE.wasm

Builds a gatehouse component from SOURCE (.js, .mjs or .ts), an ES module that exports
\`invoke\` (world adapter; and \`readResource\`, \`getPrompt\`, \`complete\` if it serves
resources, prompts or completions) or \`evaluate\` (world policy).

  -w, --world   adapter | policy (default: adapter)
  -o, --out     where to write the component
  -h, --help    this text`;

function fail(message) {
  console.error(`gatehouse-js-build: ${message}`);
  process.exit(2);
}

let options;
try {
  options = parseArgs({
    allowPositionals: true,
    options: {
      world: { type: 'string', short: 'w', default: 'adapter' },
      out: { type: 'string', short: 'o' },
      help: { type: 'boolean', short: 'h' },
    },
  });
} catch (e) {
  fail(`${e.message}\n\n${usage}`);
}
const { values, positionals } = options;
if (values.help) {
  console.log(usage);
  process.exit(0);
}
if (positionals.length !== 1) fail(`expected one SOURCE\n\n${usage}`);
if (!values.out) fail(`--out is required\n\n${usage}`);
if (!['adapter', 'policy'].includes(values.world)) {
  fail(`--world must be \`adapter\` or \`policy\`, not \`${values.world}\``);
}
const source = resolve(positionals[0]);
await stat(source).catch(() => fail(`cannot read ${source}`));

/** The entry of an adapter's bundle: `source`'s exports, and the defaults of those it lacks. */
function adapterEntry(source) {
  return `import * as module from ${JSON.stringify(source)};
import { completions, fail, prompts, resources } from './index.js';
const exported = { ...module };
if (typeof exported.invoke !== 'function') {
  throw new Error('the adapter module does not export \`invoke\` (build it with \`adapter({...})\`)');
}
export const invoke = exported.invoke;
export const readResource = exported.readResource ?? resources((uri) => {
  throw fail.notFound('RESOURCE_NOT_FOUND', \`this adapter serves no resource at \\\`\${uri}\\\`\`);
});
export const getPrompt = exported.getPrompt ?? prompts({});
export const complete = exported.complete ?? completions(() => []);
`;
}

/** Binds a policy's `gatehouse:plugin/caller` import (through the SDK) to a refusal. */
const noCaller = {
  name: 'gatehouse-no-caller',
  setup(build) {
    build.onResolve({ filter: /^gatehouse:plugin\/caller@/ }, (args) => ({ path: args.path, namespace: 'no-caller' }));
    build.onLoad({ filter: /.*/, namespace: 'no-caller' }, () => ({
      loader: 'js',
      contents: `const none = () => { throw new Error('a policy has no caller to tell or ask'); };
export const can = none, progress = none, notify = none, ask = none, askAll = none;`,
    }));
  },
};

let esbuild, componentize;
try {
  esbuild = await import('esbuild');
  ({ componentize } = await import('@bytecodealliance/componentize-js'));
} catch (e) {
  fail(
    `the SDK's toolchain is not installed (${e.message}); run \`npm ci\` in ${sdk} ` +
      '(or `build-support/toolchains` in the gatehouse repository)',
  );
}

const work = await mkdtemp(join(tmpdir(), 'gatehouse-js-'));
try {
  const bundle = join(work, 'bundle.js');
  const adapter = values.world === 'adapter';
  const built = await esbuild
    .build({
      // An adapter's module, with what it leaves out of the world's exports supplied.
      ...(adapter
        ? { stdin: { contents: adapterEntry(source), resolveDir: sdk, sourcefile: 'adapter-entry.js' } }
        : { entryPoints: [source] }),
      plugins: adapter ? [] : [noCaller],
      bundle: true,
      format: 'esm',
      platform: 'neutral',
      target: 'es2022',
      outfile: bundle,
      external: ['gatehouse:*', 'wasi:*'],
      alias: { '@gatehouse/sdk': join(sdk, 'index.js') },
      logLevel: 'silent',
    })
    .catch((e) => fail(`bundling ${source} failed:\n${e.message}`));
  for (const warning of built.warnings) console.error(`warning: ${warning.text}`);

  console.error(`componentizing ${positionals[0]} for the ${values.world} world (this takes a while)...`);
  const { component } = await componentize({
    sourcePath: bundle,
    witPath: join(sdk, 'wit'),
    worldName: values.world,
    // A policy has no wasi:http import (it cannot reach out by construction); no component
    // serves incoming requests.
    disableFeatures: values.world === 'policy' ? ['http', 'fetch-event'] : ['fetch-event'],
  }).catch((e) => fail(`componentize-js failed:\n${e.message ?? e}`));
  await writeFile(values.out, component);
  console.error(`wrote ${values.out} (${(component.byteLength / 1048576).toFixed(1)} MiB)`);
} finally {
  await rm(work, { recursive: true, force: true });
}
