/** See cli/build-options.mjs. */
import type { BuildOptions, Metafile } from 'esbuild';

export const EXTERNAL: string[];
export const BANNER: string;
export const BUNDLE_OPTIONS: BuildOptions & { metafile: true };
export function copyRuntimeFiles(root: string, out: string): string[];
export function ownSources(metafile: Metafile): string[];
