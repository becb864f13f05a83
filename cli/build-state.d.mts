/** See cli/build-state.mjs. */
export function isCurrentBuild(root: URL, buildDir: URL): boolean;
/** See cli/build-state.mjs. */
export function cliEntry(
  root: URL,
  args: string[],
  env: Record<string, string | undefined>,
): { run: 'version' } | { run: 'build'; main: URL; sourceMaps: boolean } | { run: 'sources' };
/** See cli/build-state.mjs. */
export const STACK_COMMANDS: readonly string[];
