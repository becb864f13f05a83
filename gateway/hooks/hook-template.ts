/**
 * A hook's template rendered over its payload (docs/GATEWAY.md "Webhooks"): `{{path.to.field}}` is
 * replaced by that field of the JSON payload (array items by index: `{{pull_requests.0.number}}`),
 * `{{$hook}}`, `{{$event}}`, `{{$delivery}}` and `{{$payload}}` by the hook's name, the event, the
 * delivery id and the whole payload. Only own fields are read (`{{constructor}}` finds nothing), a
 * missing field is empty, an object or array is its JSON; every value is one line clipped to
 * `maxValueChars`, and the input is cut at `maxInputChars`. Nothing is evaluated: no expression,
 * helper, loop or partial. Pure.
 */
import { clip } from '../../scheduler/text/clip.ts';

/** What a template can name besides the payload's fields. */
export interface HookTemplateVars {
  hook: string;
  event: string;
  delivery: string;
}

/** The bounds of a rendered input. */
export interface HookTemplateLimits {
  /** Characters of one value put in. */
  maxValueChars: number;
  /** Characters of the whole input. */
  maxInputChars: number;
}

const PLACEHOLDER = /\{\{\s*([^{}\s]+)\s*\}\}/g;

/** Render `template` over `payload`. */
export function renderHookTemplate(template: string, payload: unknown, vars: HookTemplateVars, limits: HookTemplateLimits): string {
  const text = template.replace(PLACEHOLDER, (_all, name: string) => clip(valueText(lookup(name, payload, vars)), limits.maxValueChars));
  return text.length <= limits.maxInputChars ? text : `${text.slice(0, limits.maxInputChars - 1)}…`;
}

function lookup(name: string, payload: unknown, vars: HookTemplateVars): unknown {
  switch (name) {
    case '$hook':
      return vars.hook;
    case '$event':
      return vars.event;
    case '$delivery':
      return vars.delivery;
    case '$payload':
      return payload;
  }
  let node: unknown = payload;
  for (const part of name.split('.')) {
    if (typeof node !== 'object' || node === null) return undefined;
    if (Array.isArray(node) ? !/^\d+$/.test(part) : false) return undefined;
    if (!Object.hasOwn(node, part)) return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

function valueText(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

/** Whether every field `match` names equals its value (a number or boolean compared as its text). */
export function payloadMatches(payload: unknown, match: Readonly<Record<string, string>>): boolean {
  const vars = { hook: '', event: '', delivery: '' };
  return Object.entries(match).every(([path, expected]) => {
    const v = lookup(path, payload, vars);
    return (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') && String(v) === expected;
  });
}
