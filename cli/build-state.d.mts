/** See cli/build-state.mjs. */
export function isCurrentBuild(root: URL, buildDir: URL): boolean;
