/**
 * The `inbox` queue's jobs — user messages, slash commands, goal continuations — as a kind of job
 * (`runtime/job-processor.ts`).
 */
import { QUEUES } from '../../scheduler/store/keys.ts';
import type { InboxJobData } from '../../scheduler/session/inbox.ts';
import type { JobProcessor } from '../runtime/job-processor.ts';
import { goalHooks } from './goal-processor.ts';
import { processInbox, type InboxResult } from './inbox-processor.ts';

export const inboxJobs: JobProcessor<InboxJobData, InboxResult> = {
  queue: QUEUES.inbox,
  process: (job, token, signal, deps) => processInbox(job, token, signal, deps, goalHooks),
};
