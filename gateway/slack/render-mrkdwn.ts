/**
 * A reply's Markdown as Slack mrkdwn, in parts Slack takes whole.
 *
 * Rendering is slackify-markdown's (`**b**` → `*b*`, `[t](u)` → `<u|t>`, headings
 * bold, lists with bullets, `&`, `<`, `>` escaped). Slack truncates a message's
 * `text` past 40,000 characters and asks to keep it under 4,000; a longer reply
 * is cut at {@link SLACK_MESSAGE_LIMIT} at line boundaries (then spaces), with
 * the same cutter as Telegram's (gateway/telegram/split-message.ts): the parts
 * concatenated are the rendered text exactly, so nothing is lost.
 */
import slackifyMarkdown from 'slackify-markdown';
import { splitMessage } from '../telegram/split-message.ts';

/** Longest part sent as one message (Slack's recommended `text` limit). */
export const SLACK_MESSAGE_LIMIT = 4000;

/** Markdown → mrkdwn. */
export function renderMrkdwn(markdown: string): string {
  // remark-stringify separates two adjacent blocks it cannot tell apart (a list, then code) with an
  // empty HTML comment, which Slack would show as text.
  return slackifyMarkdown(markdown)
    .replace(/^<!---->\n\n?/gm, '')
    .trimEnd();
}

/** The parts of a reply, rendered and cut under `limit` at line boundaries. */
export function slackParts(markdown: string, limit = SLACK_MESSAGE_LIMIT): string[] {
  return splitMessage(renderMrkdwn(markdown), limit);
}
