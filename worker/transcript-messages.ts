import type { TranscriptMessage } from '../scheduler/session-store.ts';
import type { ChatMessage } from './turn-runners/turn-runner.ts';

/** The session transcript plus the new input, as runner messages. */
export function turnMessages(transcript: TranscriptMessage[], input: string): ChatMessage[] {
  return [...transcript.map((m) => ({ role: m.role, content: m.content })), { role: 'user', content: input }];
}
