#!/usr/bin/env node
// The `hermes` command. Sources are TypeScript run through tsx (no build step).
import { register } from 'tsx/esm/api';

register();
await import('./main.ts');
