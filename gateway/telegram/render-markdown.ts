/**
 * Replies are Markdown (what models write); Telegram shows formatting given as
 * message entities. This turns Markdown into the plain text Telegram displays
 * plus its entities (bold, italic, strikethrough, code, pre with language,
 * text links), parsed by `marked`'s lexer.
 *
 * Text-preserving by design: everything that is not a formatting marker stays
 * as written (line breaks, list bullets, numbering, spacing), so a plain reply
 * is sent exactly as it came, and only `**`, `_`, `` ` ``, fences, `~~`, link
 * brackets and heading `#`s are replaced by entities. Entities rather than
 * HTML or MarkdownV2 markup: nothing needs escaping, and a split can never
 * leave a half tag (see `splitFormatted`). Offsets and lengths are UTF-16 code
 * units, as Telegram counts them and as JavaScript strings are indexed.
 */
import { marked, type Token, type Tokens } from 'marked';
import type { MessageEntity } from 'grammy/types';
import { nextCut, TELEGRAM_MESSAGE_LIMIT } from './split-message.ts';

/** Text as Telegram displays it, with its formatting. */
export interface FormattedText {
  text: string;
  entities: MessageEntity[];
}

type Inline = Token & { tokens?: Token[]; text?: string; href?: string; lang?: string };

/** Render Markdown `source` into plain text and Telegram entities (pure). */
export function renderMarkdown(source: string): FormattedText {
  const normalised = source.replace(/\r\n?/g, '\n');
  let text = '';
  const entities: MessageEntity[] = [];
  const mark = (start: number, type: MessageEntity['type'], extra: Record<string, string> = {}) => {
    const length = text.length - start;
    if (length > 0) entities.push({ type, offset: start, length, ...extra } as MessageEntity);
  };

  /** Emit `raw` with each child rendered in place; what lies between children is kept verbatim. */
  const renderWithin = (raw: string, children: Token[] | undefined, keepOuter: boolean): void => {
    if (!children || children.length === 0) {
      text += raw;
      return;
    }
    let cursor = 0;
    for (const child of children) {
      const at = raw.indexOf(child.raw, cursor);
      if (at < 0) {
        // The child's source is not a plain substring (e.g. a blockquote's `>` prefixes): keep the rest as written.
        text += raw.slice(cursor);
        return;
      }
      if (keepOuter || cursor > 0) text += raw.slice(cursor, at);
      render(child);
      cursor = at + child.raw.length;
    }
    if (keepOuter) text += raw.slice(cursor);
  };

  const render = (token: Token): void => {
    const t = token as Inline;
    const start = text.length;
    switch (t.type) {
      case 'strong':
        renderWithin(t.raw, t.tokens, false);
        mark(start, 'bold');
        return;
      case 'em':
        renderWithin(t.raw, t.tokens, false);
        mark(start, 'italic');
        return;
      case 'del':
        renderWithin(t.raw, t.tokens, false);
        mark(start, 'strikethrough');
        return;
      case 'codespan':
        text += decodeEntities(t.text ?? '');
        mark(start, 'code');
        return;
      case 'code': {
        const trailing = /\n*$/.exec(t.raw)![0];
        if (/^(```|~~~)/.test(t.raw)) {
          text += t.text ?? '';
          mark(start, 'pre', (t as Tokens.Code).lang ? { language: (t as Tokens.Code).lang! } : {});
          text += trailing;
        } else {
          text += t.raw; // indented code: kept as written
        }
        return;
      }
      case 'link': {
        const href = t.href ?? '';
        if (!/^https?:\/\//i.test(href)) {
          text += t.raw;
          return;
        }
        renderWithin(t.raw, t.tokens, false);
        if (text.length === start) text += href;
        if (text.slice(start) !== href) mark(start, 'text_link', { url: href });
        return;
      }
      case 'heading': {
        const trailing = /\n*$/.exec(t.raw)![0];
        renderWithin(
          t.raw
            .replace(/\n*$/, '')
            .replace(/^#{1,6}[ \t]+/, '')
            .replace(/[ \t]+#+[ \t]*$/, ''),
          t.tokens,
          true,
        );
        mark(start, 'bold');
        text += trailing;
        return;
      }
      case 'escape':
        text += t.text ?? '';
        return;
      case 'html':
      case 'text':
      case 'space':
      case 'hr':
      case 'br':
        if (t.tokens && t.tokens.length > 0) renderWithin(t.raw, t.tokens, true);
        else text += t.raw;
        return;
      case 'list':
        for (const item of (t as Tokens.List).items) render(item);
        text += t.raw.slice((t as Tokens.List).items.reduce((n, i) => n + i.raw.length, 0));
        return;
      default:
        // paragraph, list_item, table cells…: their own markup (bullets, numbers) is kept.
        renderWithin(t.raw, t.tokens, true);
    }
  };

  for (const token of marked.lexer(normalised)) render(token);
  return { text, entities };
}

/** marked escapes `&<>"'` in code spans; Telegram wants the characters. */
function decodeEntities(s: string): string {
  return s.replace(/&(amp|lt|gt|quot|#39);/g, (_m, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]!);
}

/**
 * Cut formatted text into parts of at most `limit` characters, at the same
 * places `splitMessage` cuts plain text (`nextCut`: after a line break, then a
 * space, in the second half of the window; else a hard cut that keeps surrogate
 * pairs). The separator stays at the end of its part, so the parts' texts
 * concatenated are the text exactly; a whitespace-only part is not sent. An
 * entity that spans a cut is closed at the end of one part and reopened at the
 * start of the next, so no part carries a broken entity.
 */
export function splitFormatted(input: FormattedText, limit = TELEGRAM_MESSAGE_LIMIT): FormattedText[] {
  const { text } = input;
  const parts: FormattedText[] = [];
  const take = (from: number, to: number) => {
    if (text.slice(from, to).trim().length === 0) return;
    const entities = input.entities
      .filter((e) => e.offset < to && e.offset + e.length > from)
      .map((e) => {
        const s = Math.max(e.offset, from);
        const end = Math.min(e.offset + e.length, to);
        return { ...e, offset: s - from, length: end - s };
      })
      .filter((e) => e.length > 0);
    parts.push({ text: text.slice(from, to), entities });
  };
  let start = 0;
  while (text.length - start > limit) {
    const end = nextCut(text, start, limit);
    take(start, end);
    start = end;
  }
  take(start, text.length);
  return parts;
}
