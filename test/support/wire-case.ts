/**
 * The one-casing check of every wire (docs/GATEWAY.md, "One casing"): the path of each key, at any
 * depth and inside arrays, that is not snake_case (`schedules[0].spend.inputTokens`). Tests of `/api`
 * answers, event streams, `--json` output and MCP results expect it to be `[]`.
 */
export function camelKeys(value: unknown, path = '$'): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => camelKeys(v, `${path}[${i}]`));
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([k, v]) => [...(/[a-z0-9][A-Z]/.test(k) ? [`${path}.${k}`] : []), ...camelKeys(v, `${path}.${k}`)]);
}
