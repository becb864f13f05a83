/**
 * Which forum topic a send names (`message_thread_id`).
 *
 * A forum's General topic has thread id 1, but the Bot API refuses
 * `message_thread_id: 1` on sends with 400 "message thread not found"
 * (telegram-bot-api#798): a message reaches General only *without* a thread id.
 * So a target `telegram:<chat>:1` — or a route that carries thread 1 — is sent
 * to the chat plainly; every other topic is named. Every Bot API call of the
 * gateway that addresses a topic (`sendMessage`, `sendChatAction`) takes its
 * thread parameters from here.
 */

/** The thread id of a forum's General topic. */
export const GENERAL_TOPIC_ID = '1';

/**
 * The thread parameters of a send to `threadId`: `{}` for none and for the
 * General topic, else `{ message_thread_id }`.
 */
export function threadParams(threadId: string | undefined): { message_thread_id?: number } {
  if (threadId === undefined || threadId === '' || threadId === GENERAL_TOPIC_ID) return {};
  return { message_thread_id: Number(threadId) };
}
