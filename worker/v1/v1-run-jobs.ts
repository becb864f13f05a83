/** Queued `/v1` runs as a kind of job (`runtime/job-processor.ts`). */
import { QUEUES } from '../../scheduler/store/keys.ts';
import type { V1RunJobData } from '../../scheduler/v1/v1-runs.ts';
import type { JobProcessor } from '../runtime/job-processor.ts';
import { processV1Run, type V1RunJobResult } from './v1-run-processor.ts';

/** A run belongs to no session: its jobs live on the first shard, whose consumers run them. */
export const v1RunJobs: JobProcessor<V1RunJobData, V1RunJobResult> = {
  queue: QUEUES.v1Runs,
  firstShardOnly: true,
  process: processV1Run,
};
