#!/usr/bin/env node
// Builds and packs the .vsix once (the typecheck included) for every VS Code test of a pytest
// run: `build-vsix.mjs DIR` writes DIR/agent-lsp.vsix and prints its path. run-test.mjs then
// takes it as AGENT_LSP_VSIX instead of building its own.
import { buildVsix, env } from './harness.mjs';

delete env.AGENT_LSP_VSIX;
process.stdout.write(`${buildVsix(process.argv[2])}\n`);
