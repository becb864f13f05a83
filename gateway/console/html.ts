/**
 * HTML built from a tagged template: every interpolated value is escaped (`escape-html`) unless it
 * is already `Html` (made by `html` or `raw`); arrays are joined. So a prompt, a reply, a tool's
 * output or a job name is always text on the page, never markup.
 */
import escapeHtml from 'escape-html';

/** Markup that is safe to insert as is. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

/** A value a template may hold: text (escaped), markup, nothing, or a list of these. */
export type HtmlValue = Html | string | number | boolean | null | undefined | readonly HtmlValue[];

function render(v: HtmlValue): string {
  if (v instanceof Html) return v.value;
  if (Array.isArray(v)) return (v as readonly HtmlValue[]).map(render).join('');
  if (v === null || v === undefined || v === false) return '';
  return escapeHtml(String(v));
}

/** The template tag: `html\`<b>${name}</b>\`` escapes `name`. */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]!;
  return new Html(out);
}

/** Markup written by the console itself (never user input). */
export function raw(markup: string): Html {
  return new Html(markup);
}
